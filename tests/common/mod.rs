//! Helpers shared by the CLI integration tests: run the `zen` binary of this
//! build. Each test file uses some of them.
#![allow(dead_code)]

use assert_cmd::Command;

/// The `zen` binary of the same target directory.
pub fn zen() -> Command {
    Command::cargo_bin("zen").expect("the zen binary is built")
}

/// Run `zen args…`; return (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = zen().args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// Run `zen args…`, expect exit 0, and return stdout.
pub fn ok(args: &[&str]) -> String {
    let (code, out, err) = run(args);
    assert_eq!(code, 0, "zen {args:?}: {err}");
    out
}
