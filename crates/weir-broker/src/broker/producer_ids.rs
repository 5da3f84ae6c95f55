//! Producer ids handed out by this broker, from blocks the controller
//! quorum allocates. As Kafka's broker does, the next block is asked for
//! before the current one runs out, in the background; a producer that
//! finds no id left is told to retry (COORDINATOR_LOAD_IN_PROGRESS) rather
//! than kept waiting for the quorum.

use std::ops::Range;

/// Ids asked of the controller at a time.
pub(crate) const BLOCK_SIZE: i64 = 1000;

/// The share of a block handed out before the next one is asked for.
const PREFETCH_PERCENT: i64 = 90;

/// The blocks of producer ids on hand; pure state, the caller sends the
/// requests it says to send.
#[derive(Debug, Default)]
pub(crate) struct ProducerIdBlocks {
    current: Range<i64>,
    /// Where `current` started, for the prefetch point.
    current_first: i64,
    next: Option<Range<i64>>,
    requesting: bool,
}

/// What [`ProducerIdBlocks::claim`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The id handed out; `None`: none on hand, ask again later.
    pub(crate) id: Option<i64>,
    /// Ask the controller for the next block now.
    pub(crate) request_block: bool,
}

impl ProducerIdBlocks {
    /// Hands out the next id, moving to the next block when the current
    /// one is used up.
    pub(crate) fn claim(&mut self) -> Claim {
        if self.current.is_empty() {
            if let Some(next) = self.next.take() {
                self.current_first = next.start;
                self.current = next;
            }
        }
        let id = self.current.next();
        let prefetch_at =
            self.current_first + (self.current.end - self.current_first) * PREFETCH_PERCENT / 100;
        let wanted = match id {
            None => true,
            Some(id) => id >= prefetch_at,
        };
        let request_block = wanted && self.next.is_none() && !self.requesting;
        if request_block {
            self.requesting = true;
        }
        Claim { id, request_block }
    }

    /// Asks for a block unless one is on hand or asked for already; true
    /// if the caller should send the request.
    pub(crate) fn request_if_empty(&mut self) -> bool {
        let wanted = self.current.is_empty() && self.next.is_none() && !self.requesting;
        if wanted {
            self.requesting = true;
        }
        wanted
    }

    /// The controller's answer to a request: `None` if it failed (the next
    /// claim asks again).
    pub(crate) fn arrived(&mut self, block: Option<Range<i64>>) {
        self.requesting = false;
        if let Some(block) = block {
            self.next = Some(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_no_block_a_claim_asks_for_one_once_and_hands_out_nothing() {
        let mut blocks = ProducerIdBlocks::default();
        assert_eq!(
            blocks.claim(),
            Claim {
                id: None,
                request_block: true
            }
        );
        assert_eq!(
            blocks.claim(),
            Claim {
                id: None,
                request_block: false
            },
            "already asked"
        );
        blocks.arrived(Some(0..10));
        assert_eq!(blocks.claim().id, Some(0));
    }

    #[test]
    fn the_next_block_is_asked_for_at_ninety_percent_and_taken_when_the_current_runs_out() {
        let mut blocks = ProducerIdBlocks::default();
        blocks.claim();
        blocks.arrived(Some(100..110));
        let claims: Vec<Claim> = (0..10).map(|_| blocks.claim()).collect();
        let ids: Vec<i64> = claims.iter().filter_map(|c| c.id).collect();
        assert_eq!(ids, (100..110).collect::<Vec<_>>());
        let asked: Vec<i64> = claims
            .iter()
            .filter(|c| c.request_block)
            .filter_map(|c| c.id)
            .collect();
        assert_eq!(asked, vec![109], "asked once, at the 90% point");
        blocks.arrived(Some(500..510));
        assert_eq!(blocks.claim().id, Some(500), "no gap in service");
    }

    #[test]
    fn a_failed_request_is_asked_again_by_the_next_claim() {
        let mut blocks = ProducerIdBlocks::default();
        assert!(blocks.claim().request_block);
        blocks.arrived(None);
        assert!(blocks.claim().request_block);
    }

    #[test]
    fn a_prefetch_at_start_is_asked_only_when_nothing_is_on_hand() {
        let mut blocks = ProducerIdBlocks::default();
        assert!(blocks.request_if_empty());
        assert!(!blocks.request_if_empty(), "in flight");
        blocks.arrived(Some(0..10));
        assert!(!blocks.request_if_empty());
    }
}
