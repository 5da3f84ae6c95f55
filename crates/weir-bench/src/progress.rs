//! A progress bar on stderr while a run goes on, drawn by its own thread
//! from a counter the benchmark already keeps, so the hot path pays nothing
//! for it. Hidden with `--json` and when stderr is not a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

pub(crate) struct Progress {
    bar: ProgressBar,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing `count()` out of `total`, every 200 ms.
    pub(crate) fn start(
        label: &str,
        total: u64,
        json: bool,
        count: impl Fn() -> u64 + Send + 'static,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        if json || !std::io::stderr().is_terminal() {
            return Self {
                bar: ProgressBar::hidden(),
                stop,
                thread: None,
            };
        }
        let bar = ProgressBar::new(total).with_style(
            ProgressStyle::with_template(
                "{prefix} {elapsed} [{bar:30}] {human_pos}/{human_len} {rate} eta {eta}",
            )
            .expect("valid template")
            .with_key(
                "rate",
                |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0}/s", state.per_sec());
                },
            )
            .progress_chars("=> "),
        );
        bar.set_prefix(label.to_owned());
        let thread = {
            let bar = bar.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("progress".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        bar.set_position(count().min(total));
                        std::thread::sleep(Duration::from_millis(200));
                    }
                })
                .expect("spawn the progress thread")
        };
        Self {
            bar,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops drawing and clears the bar.
    pub(crate) fn finish(mut self) {
        self.stop_thread();
        self.bar.finish_and_clear();
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_thread();
    }
}
