//! What a coordinator may know of the broker it runs in: its node id, the
//! time, and the metadata as this node applied it. Coordinators take this
//! instead of the broker, so that they cannot reach into its other parts.

use std::sync::Arc;

use tokio::sync::watch;
use weir_log::Clock;
use weir_meta::MetadataImage;

#[derive(Clone)]
pub struct Environment {
    node_id: i32,
    clock: Arc<dyn Clock>,
    image: watch::Receiver<Arc<MetadataImage>>,
}

impl Environment {
    pub fn new(
        node_id: i32,
        clock: Arc<dyn Clock>,
        image: watch::Receiver<Arc<MetadataImage>>,
    ) -> Self {
        Self {
            node_id,
            clock,
            image,
        }
    }

    /// This broker's id, which never changes.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// Wall-clock milliseconds on the broker's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The metadata image this node has applied.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// Runs `f` over the metadata image this node has applied.
    pub fn with_image<T>(&self, f: impl FnOnce(&MetadataImage) -> T) -> T {
        // Not under the watch's lock: the next image must not wait for `f`.
        f(&self.image())
    }
}
