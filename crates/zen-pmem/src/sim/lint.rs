//! Lints: persistence bugs and wasted persist work the simulator sees as they happen.
//!
//! What: three *errors* (each one is a durability bug whatever the crash
//! images show) and three *performance warnings* (correct but wasted work):
//!
//! | kind | fires when |
//! | --- | --- |
//! | error: acked with pending | `Ack{txn}` by thread T while an atom stored by T is not durable (ADR) |
//! | error: pending at clean shutdown | a `CleanShutdown` marker while any atom is pending |
//! | error: torn commit word | one aligned word written by ≥ 2 partial (sub-word, non-`store_u64`) stores of one thread in one fence epoch |
//! | warning: clean line flush | a line flushed with no store to it since its last flush by anyone |
//! | warning: repeated flush | a line flushed twice by one thread before its fence |
//! | warning: empty fence | a fence with no flush marks and no store since the thread's last fence |
//!
//! How: the live machine (`machine.rs`) evaluates the rules on every event and
//! counts into a [`LintReport`]; the first [`MAX_MESSAGES`] errors keep a
//! human-readable message each.
//!
//! Invariant: `errors().is_empty()` exactly when no error was counted.

/// Error messages kept per report (counts are always exact).
pub const MAX_MESSAGES: usize = 32;

/// The three error kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LintError {
    AckedWithPending,
    PendingAtCleanShutdown,
    TornCommitWord,
}

/// The three warning kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LintWarning {
    CleanLineFlush,
    RepeatedFlush,
    EmptyFence,
}

/// Counted lints of a run (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LintReport {
    /// Errors: transactions acknowledged while their thread had non-durable atoms.
    pub acked_with_pending: u64,
    /// Errors: clean-shutdown markers with atoms still pending.
    pub pending_at_clean_shutdown: u64,
    /// Errors: aligned words written by two or more partial stores in one epoch.
    pub torn_commit_words: u64,
    /// Warnings: flushes of lines with no store since their last flush.
    pub clean_line_flushes: u64,
    /// Warnings: lines flushed twice by one thread before its fence.
    pub repeated_flushes: u64,
    /// Warnings: fences with nothing flushed or stored before them.
    pub empty_fences: u64,
    messages: Vec<String>,
}

impl LintReport {
    pub(crate) fn error(&mut self, kind: LintError, message: impl FnOnce() -> String) {
        match kind {
            LintError::AckedWithPending => self.acked_with_pending += 1,
            LintError::PendingAtCleanShutdown => self.pending_at_clean_shutdown += 1,
            LintError::TornCommitWord => self.torn_commit_words += 1,
        }
        if self.messages.len() < MAX_MESSAGES {
            self.messages.push(message());
        }
    }

    pub(crate) fn warn(&mut self, kind: LintWarning) {
        match kind {
            LintWarning::CleanLineFlush => self.clean_line_flushes += 1,
            LintWarning::RepeatedFlush => self.repeated_flushes += 1,
            LintWarning::EmptyFence => self.empty_fences += 1,
        }
    }

    /// Number of errors counted.
    pub fn error_count(&self) -> u64 {
        self.acked_with_pending + self.pending_at_clean_shutdown + self.torn_commit_words
    }

    /// Number of performance warnings counted.
    pub fn warning_count(&self) -> u64 {
        self.clean_line_flushes + self.repeated_flushes + self.empty_fences
    }

    /// True when no error was counted (warnings do not count).
    pub fn is_clean(&self) -> bool {
        self.error_count() == 0
    }

    /// One human-readable line per error (the first [`MAX_MESSAGES`], then a
    /// line saying how many more there were).
    pub fn errors(&self) -> Vec<String> {
        let mut lines = self.messages.clone();
        let kept = lines.len() as u64;
        if self.error_count() > kept {
            lines.push(format!("... and {} more lint errors", self.error_count() - kept));
        }
        lines
    }

    /// A one-line summary of all counts.
    pub fn summary(&self) -> String {
        format!(
            "lint errors: {} acked-with-pending, {} pending-at-clean-shutdown, {} torn-commit-word; \
             warnings: {} clean-line flushes, {} repeated flushes, {} empty fences",
            self.acked_with_pending,
            self.pending_at_clean_shutdown,
            self.torn_commit_words,
            self.clean_line_flushes,
            self.repeated_flushes,
            self.empty_fences
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_capped_but_counts_are_exact() {
        let mut r = LintReport::default();
        for i in 0..(MAX_MESSAGES + 3) {
            r.error(LintError::TornCommitWord, || format!("torn {i}"));
        }
        r.warn(LintWarning::EmptyFence);
        assert_eq!(r.error_count(), MAX_MESSAGES as u64 + 3);
        assert_eq!(r.warning_count(), 1);
        let errors = r.errors();
        assert_eq!(errors.len(), MAX_MESSAGES + 1);
        assert_eq!(errors.last().unwrap(), "... and 3 more lint errors");
        assert!(!r.is_clean());
    }
}
