//! The `weir` CLI run as a process, and what it printed.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code,
            Some(0),
            "command failed\nstdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// A failure with exactly one line on stderr, which is returned.
    pub fn failed_with_one_line(self) -> String {
        assert!(
            matches!(self.code, Some(c) if c != 0),
            "expected a failure, got {:?}\nstdout: {}\nstderr: {}",
            self.code,
            self.stdout,
            self.stderr
        );
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "stderr: {:?}", self.stderr);
        lines[0].to_owned()
    }

    pub fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    /// A usage error from the argument parser: exit code 2.
    pub fn usage_error(self) -> String {
        assert_eq!(
            self.code,
            Some(2),
            "stdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        self.stderr
    }

    /// The lines of the table that starts with the line starting with
    /// `header`, each split into its cells.
    pub fn table(&self, header: &str) -> Vec<Vec<&str>> {
        self.stdout
            .lines()
            .skip_while(|l| !l.starts_with(header))
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect()
    }
}

/// Runs `weir ARGS` with `input` on stdin; kills it after a minute.
pub fn run(args: &[&str], input: &[u8]) -> Out {
    run_with_env(args, input, &[])
}

/// [`run`] with extra environment variables.
pub fn run_with_env(args: &[&str], input: &[u8], envs: &[(&str, &str)]) -> Out {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("WEIR_LOG", "warn")
        .env_remove("WEIR_BOOTSTRAP")
        .env_remove("WEIR_COMMAND_CONFIG")
        .envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run weir");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(output) => output.expect("wait for weir"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("weir {args:?} did not finish within a minute");
        }
    };
    Out {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs a future to completion on a fresh single-threaded runtime.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}
