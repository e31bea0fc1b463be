//! Hermitage (Kleppmann, github.com/ept/hermitage): the classic isolation
//! anomalies, each a scripted interleaving of two or three transactions on the
//! table `test(id, value)` = {(1, 10), (2, 20)}, run against every protocol of
//! `CcKind::ALL` and checked for serializability.
//!
//! SCRIPTS
//!   `tests/hermitage/<anomaly>.script`, one `#[test]` each, in toydb's
//!   golden-script form: `#` lines are prose; a block is one or more commands,
//!   `---`, then the expected output; blank lines separate blocks.
//!
//!   ```text
//!   t1 get 1            read a row                        t1: 10 | t1: (none)
//!   t1 set 1 11         update a row                      t1: ok | t1: not found
//!   t1 insert 3 30      insert a row                      t1: ok | t1: duplicate
//!   t1 delete 1         delete a row                      t1: ok | t1: not found
//!   t1 scan 1 9         the rows with 1 <= id <= 9        t1: [1=10 2=20]
//!   t1 commit           commit                            t1: committed
//!   t1 abort            roll back                         t1: rolled back
//!   t1 sleep 600        stall 600 ms (tests of the driver) t1: ok
//!   not-promised CC WHY protocol CC does not promise to prevent this anomaly
//!   check               the serializability check and the verdict (last)
//!   ```
//!
//!   A step that has not answered within `STEP_TIMEOUT` prints `BLOCKED`; its
//!   answer is printed, marked `(unblocked)`, under the step during which it
//!   arrived. An engine abort prints `ABORTED (reason)`; a command sent to a
//!   transaction that has already ended prints `(already aborted)` or
//!   `(already committed)`. Protocols may legitimately differ (one blocks where
//!   another aborts): where their outputs of a block differ, each protocol's
//!   lines are printed prefixed with `[name]`. `UPDATE_GOLDENFILES=1` rewrites
//!   the expected output in place (review the diff before committing it).
//!   Besides Hermitage's ten, `g2_late_insert` aims at timestamp ordering (an
//!   older transaction inserting into a range a newer one scanned); it caught a
//!   G2 cycle in the first MVCC.
//!
//! HOW A SCRIPT RUNS
//!   A fresh engine (DRAM pool) per script and protocol, the table loaded by a
//!   committed setup transaction. Each transaction tN runs on its own thread
//!   with its own worker, inside one `EngineWorker::execute` (one attempt:
//!   errors are never retried). All of them begin before the first step, t1
//!   first (the driver waits for each body to announce itself, so timestamp
//!   protocols see t1 < t2 < t3). The body then loops: receive a command over a
//!   channel, run it, answer on a reply channel shared by all transactions.
//!   `commit` returns `Ok(())` from the body (so `execute` commits), `abort`
//!   returns `user_abort()`, an engine abort returns that error; the answer to
//!   the command that ended the transaction is sent after `execute` returns,
//!   when its locks are released. The driver sends one command at a time and
//!   waits for any outstanding answer up to `STEP_TIMEOUT`.
//!
//!   ```text
//!    driver ──"set 1 11"──▶ t1 thread: execute(|tx| loop { recv → tx.update → reply })
//!       ▲   ──"get 1"────▶ t2 thread: execute(|tx| loop { ... })
//!       └──── (txn, outcome) replies, one per command, in each txn's order ─┘
//!   ```
//!
//! THE CHECK
//!   Every transaction logs its operations with what they returned. For each
//!   order of the committed transactions (at most 3! = 6) the logs are replayed
//!   against a `BTreeMap` holding the initial table: every read and scan must
//!   return what the model holds, every write must succeed or fail as it did,
//!   and the model at the end must equal the table read back from the engine.
//!   If no order fits, the history is not serializable: the anomaly happened
//!   (`ALLOWED`, a failure unless the script says the protocol does not
//!   promise to prevent it). Otherwise the cell is `prevented`, with
//!   `(blocking)` when a step blocked and `(abort)` when the engine aborted a
//!   transaction. A protocol answering `Unsupported` is `n/a`. Unexpected
//!   errors, a transaction still blocked `HANG_TIMEOUT` after the last step,
//!   and a failed `check_invariants` are `FAILED`.
//!
//! THE MATRIX
//!   `hermitage_matrix_matches_docs` prints anomaly × protocol and compares it
//!   with the generated section of `docs/isolation.md`;
//!   `ZEN_WRITE_ISOLATION_DOC=1` rewrites that section instead.
//!
//! WHAT IT DOES NOT CHECK
//!   - Reads by transactions that end aborted (opacity): serializability says
//!     nothing about them, and OCC protocols may show such a transaction an
//!     inconsistent state before validation kills it.
//!   - Blocking is inferred from a timeout: a protocol that waits longer than
//!     `STEP_TIMEOUT` and then aborts shows `BLOCKED`, then the abort. Silo
//!     and MVCC only spin briefly on a locked record before aborting, so no
//!     cell blocks yet; `a_stalled_step_is_reported_blocked_then_unblocked`
//!     exercises that path.
//!   - Only Hermitage's interleaving of each anomaly; the randomized
//!     serializability checker covers other schedules.
//!   - Predicates on `value` (Hermitage's `where value % 3 = 0`) become scans of
//!     the whole id range: the engine offers key ranges, not predicates, so a
//!     predicate read is a range read evaluated by the client.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use zen_engine::schema::MAX_KEY;
use zen_engine::{
    AbortReason, CcKind, ColumnType, Engine, EngineConfig, EngineKind, Error, TableId, TableSchema,
    Transaction, TxnOptions, user_abort,
};
use zen_pmem::BackendKind;

/// A step not answered within this is BLOCKED.
const STEP_TIMEOUT: Duration = Duration::from_millis(500);
/// A step still unanswered this long after the last command is a hang (FAILED).
const HANG_TIMEOUT: Duration = Duration::from_secs(5);
/// Most transactions per script (the check tries every order of them).
const MAX_TXNS: usize = 3;
/// The table every script starts from.
const INITIAL: [(u64, i64); 2] = [(1, 10), (2, 20)];
/// The scripts in matrix order: file stem and the anomaly's name.
const SCRIPTS: [(&str, &str); 12] = [
    ("g0", "G0 write cycles"),
    ("g1a", "G1a aborted reads"),
    ("g1b", "G1b intermediate reads"),
    ("g1c", "G1c circular information flow"),
    ("otv", "OTV observed transaction vanishes"),
    ("pmp", "PMP predicate-many-preceders"),
    ("p4", "P4 lost update"),
    ("g_single", "G-single read skew"),
    ("g2_item", "G2-item write skew"),
    ("g2", "G2 anti-dependency cycles"),
    ("g2_late_insert", "G2, late older insert (not in Hermitage)"),
    ("update_after_delete", "An update after a concurrent delete (not in Hermitage)"),
];
const DOC_BEGIN: &str = "<!-- hermitage-matrix:begin: generated by `ZEN_WRITE_ISOLATION_DOC=1 \
                         cargo test --release -p zen-engine --test hermitage`; do not edit -->";
const DOC_END: &str = "<!-- hermitage-matrix:end -->";

macro_rules! script_tests {
    ($($test:ident => $stem:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check_script($stem);
            }
        )*
    };
}

script_tests! {
    g0_write_cycles_are_prevented => "g0",
    g1a_aborted_reads_are_prevented => "g1a",
    g1b_intermediate_reads_are_prevented => "g1b",
    g1c_circular_information_flow_is_prevented => "g1c",
    otv_observed_transaction_vanishes_is_prevented => "otv",
    pmp_predicate_many_preceders_is_prevented => "pmp",
    p4_lost_update_is_prevented => "p4",
    g_single_read_skew_is_prevented => "g_single",
    g2_item_write_skew_is_prevented => "g2_item",
    g2_anti_dependency_cycles_are_prevented => "g2",
    g2_late_insert_into_a_committed_scan_is_prevented => "g2_late_insert",
    an_update_answers_from_the_transactions_own_read => "update_after_delete",
}

// ------------------------------------------------------------------ scripts

/// One operation of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Get(u64),
    Set(u64, i64),
    Insert(u64, i64),
    Delete(u64),
    Scan(u64, u64),
    Commit,
    Abort,
    /// Stall inside the transaction (the harness's own tests of BLOCKED).
    Sleep(u64),
}

#[derive(Debug, Clone)]
enum Command {
    Step { txn: usize, op: Op },
    NotPromised { cc: CcKind, reason: String },
    Check,
}

/// A script line outside blocks (prose, blank) or a block of commands.
enum Item {
    Text(String),
    Block { commands: Vec<(String, Command)>, expected: Vec<String> },
}

struct Script {
    path: PathBuf,
    items: Vec<Item>,
    txns: usize,
}

impl Script {
    fn load(stem: &str) -> Script {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/hermitage")
            .join(format!("{stem}.script"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
        Script::parse(path, &text)
    }

    fn parse(path: PathBuf, text: &str) -> Script {
        let items = parse_items(text).unwrap_or_else(|e| panic!("{}:{e}", path.display()));
        let script = Script { txns: 0, path, items };
        let txns = script.commands().filter_map(|c| c.txn()).max().map_or(0, |t| t + 1);
        let checks: Vec<bool> = script.commands().map(|c| matches!(c, Command::Check)).collect();
        assert!(
            checks.last() == Some(&true) && checks.iter().filter(|c| **c).count() == 1,
            "{}: `check` must be the last command, once",
            script.path.display()
        );
        Script { txns, ..script }
    }

    fn commands(&self) -> impl Iterator<Item = &Command> {
        self.blocks().flat_map(|(commands, _)| commands.iter().map(|(_, c)| c))
    }

    fn blocks(&self) -> impl Iterator<Item = (&[(String, Command)], &[String])> {
        self.items.iter().filter_map(|item| match item {
            Item::Block { commands, expected } => Some((commands.as_slice(), expected.as_slice())),
            Item::Text(_) => None,
        })
    }

    fn not_promised(&self, cc: CcKind) -> Option<&str> {
        self.commands().find_map(|c| match c {
            Command::NotPromised { cc: c, reason } if *c == cc => Some(reason.as_str()),
            _ => None,
        })
    }

    /// The script text with `outputs` (one per block) as expected output.
    fn render(&self, outputs: &[Vec<String>]) -> String {
        let mut text = String::new();
        let mut outputs = outputs.iter();
        for item in &self.items {
            match item {
                Item::Text(line) => text.push_str(line),
                Item::Block { commands, .. } => {
                    for (line, _) in commands {
                        text.push_str(line);
                        text.push('\n');
                    }
                    text.push_str("---");
                    for line in outputs.next().expect("one output per block") {
                        text.push('\n');
                        text.push_str(line);
                    }
                }
            }
            text.push('\n');
        }
        text
    }
}

impl Command {
    fn txn(&self) -> Option<usize> {
        match self {
            Command::Step { txn, .. } => Some(*txn),
            _ => None,
        }
    }
}

fn parse_items(text: &str) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            items.push(Item::Text(line.to_string()));
            continue;
        }
        let mut commands = vec![(line.trim().to_string(), parse_command(line).map_err(at(n))?)];
        let mut expected = Vec::new();
        let mut separated = false;
        while let Some(&(n, next)) = lines.peek() {
            if next.trim().is_empty() {
                break;
            }
            lines.next();
            if separated {
                expected.push(next.to_string());
            } else if next.trim() == "---" {
                separated = true;
            } else if next.starts_with('#') {
                return Err(format!("{}: a comment inside a block", n + 1));
            } else {
                commands.push((next.trim().to_string(), parse_command(next).map_err(at(n))?));
            }
        }
        items.push(Item::Block { commands, expected });
    }
    Ok(items)
}

fn at(line: usize) -> impl Fn(String) -> String {
    move |e| format!("{}: {e}", line + 1)
}

fn parse_command(line: &str) -> Result<Command, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let number = |i: usize| -> Result<i64, String> {
        let word = words.get(i).ok_or_else(|| format!("`{line}`: missing argument"))?;
        word.parse().map_err(|_| format!("`{line}`: `{word}` is not a number"))
    };
    let key = |i: usize| -> Result<u64, String> {
        u64::try_from(number(i)?).map_err(|_| format!("`{line}`: negative key"))
    };
    match words.as_slice() {
        ["check"] => return Ok(Command::Check),
        ["not-promised", cc, reason @ ..] if !reason.is_empty() => {
            let cc = CcKind::parse(cc).ok_or_else(|| format!("unknown protocol `{cc}`"))?;
            return Ok(Command::NotPromised { cc, reason: reason.join(" ") });
        }
        _ => {}
    }
    let txn = words
        .first()
        .and_then(|w| w.strip_prefix('t'))
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (1..=MAX_TXNS).contains(n))
        .ok_or_else(|| format!("`{line}`: expected t1..t{MAX_TXNS}, `check` or `not-promised`"))?;
    let op = match words.get(1..).unwrap_or_default() {
        ["get", _] => Op::Get(key(2)?),
        ["set", _, _] => Op::Set(key(2)?, number(3)?),
        ["insert", _, _] => Op::Insert(key(2)?, number(3)?),
        ["delete", _] => Op::Delete(key(2)?),
        ["scan", _, _] if key(2)? <= key(3)? => Op::Scan(key(2)?, key(3)?),
        ["commit"] => Op::Commit,
        ["abort"] => Op::Abort,
        ["sleep", _] => Op::Sleep(key(2)?),
        _ => return Err(format!("`{line}`: unknown or malformed command")),
    };
    Ok(Command::Step { txn: txn - 1, op })
}

// ------------------------------------------------------------ transactions

/// What one command returned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Value(Option<i64>),
    Rows(Vec<(u64, i64)>),
    Written,
    NotFound,
    Duplicate,
    Committed,
    RolledBack,
    Aborted(AbortReason),
    Unsupported(String),
    Failed(String),
    AlreadyEnded { committed: bool },
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Value(Some(v)) => write!(f, "{v}"),
            Outcome::Value(None) => write!(f, "(none)"),
            Outcome::Rows(rows) => write!(f, "{}", format_rows(rows)),
            Outcome::Written => write!(f, "ok"),
            Outcome::NotFound => write!(f, "not found"),
            Outcome::Duplicate => write!(f, "duplicate"),
            Outcome::Committed => write!(f, "committed"),
            Outcome::RolledBack => write!(f, "rolled back"),
            Outcome::Aborted(reason) => write!(f, "ABORTED ({})", reason.name()),
            Outcome::Unsupported(m) => write!(f, "unsupported: {m}"),
            Outcome::Failed(m) => write!(f, "FAILED: {m}"),
            Outcome::AlreadyEnded { committed: true } => write!(f, "(already committed)"),
            Outcome::AlreadyEnded { committed: false } => write!(f, "(already aborted)"),
        }
    }
}

fn format_rows(rows: &[(u64, i64)]) -> String {
    let rows: Vec<String> = rows.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("[{}]", rows.join(" "))
}

enum Reply {
    /// The transaction has begun and waits for commands.
    Ready,
    Done(Outcome),
}

/// What a transaction's thread hands back: its log and how it ended.
struct TxnRecord {
    log: Vec<(Op, Outcome)>,
    committed: bool,
}

/// How the body of a transaction ended.
#[derive(Clone, Copy)]
enum Ending {
    Commit,
    Abort,
    Error,
}

/// The body of transaction `txn`: one `execute`, driven by `commands`.
fn run_txn(
    engine: Arc<dyn Engine>,
    table: TableId,
    txn: usize,
    commands: Receiver<Op>,
    replies: Sender<(usize, Reply)>,
) -> TxnRecord {
    let mut worker = engine.worker().expect("register a worker");
    let mut log = Vec::new();
    let mut ending = None;
    let result = worker.execute(&TxnOptions::default(), &mut |tx| {
        let _ = replies.send((txn, Reply::Ready));
        // The driver closing the channel (end of script) abandons the transaction.
        while let Ok(op) = commands.recv() {
            match op {
                Op::Commit => {
                    ending = Some(Ending::Commit);
                    return Ok(());
                }
                Op::Abort => {
                    ending = Some(Ending::Abort);
                    return Err(user_abort());
                }
                _ => {}
            }
            let outcome = match apply(tx, table, op) {
                Ok(outcome) => {
                    log.push((op, outcome.clone()));
                    outcome
                }
                Err(e @ Error::Abort(_)) => {
                    ending = Some(Ending::Error);
                    return Err(e);
                }
                Err(Error::Unsupported(m)) => Outcome::Unsupported(m),
                Err(e) => Outcome::Failed(e.to_string()),
            };
            let _ = replies.send((txn, Reply::Done(outcome)));
        }
        Err(user_abort())
    });
    let committed = result.is_ok();
    let outcome = match (ending, result) {
        (None, _) => None,
        (Some(Ending::Commit), Ok(_)) => Some(Outcome::Committed),
        (Some(Ending::Abort), Err(Error::Abort(AbortReason::User))) => Some(Outcome::RolledBack),
        (Some(_), Err(Error::Abort(reason))) => Some(Outcome::Aborted(reason)),
        (Some(_), Err(e)) => Some(Outcome::Failed(e.to_string())),
        (Some(_), Ok(_)) => Some(Outcome::Failed("committed after an abort".into())),
    };
    if let Some(outcome) = outcome {
        let _ = replies.send((txn, Reply::Done(outcome)));
    }
    // Answer every later command, so each command gets exactly one reply.
    for _ in commands.iter() {
        let _ = replies.send((txn, Reply::Done(Outcome::AlreadyEnded { committed })));
    }
    TxnRecord { log, committed }
}

fn apply(tx: &mut dyn Transaction, table: TableId, op: Op) -> zen_engine::Result<Outcome> {
    let written = |result: zen_engine::Result<()>| match result {
        Ok(()) => Ok(Outcome::Written),
        Err(Error::KeyNotFound { .. }) => Ok(Outcome::NotFound),
        Err(Error::DuplicateKey { .. }) => Ok(Outcome::Duplicate),
        Err(e) => Err(e),
    };
    let mut row = [0u8; 8];
    match op {
        Op::Get(key) => {
            let found = tx.get(table, key, &mut row)?;
            Ok(Outcome::Value(found.then_some(i64::from_le_bytes(row))))
        }
        Op::Set(key, value) => written(tx.update(table, key, &value.to_le_bytes())),
        Op::Insert(key, value) => written(tx.insert(table, key, &value.to_le_bytes())),
        Op::Delete(key) => written(tx.delete(table, key)),
        Op::Scan(low, high) => {
            let mut rows = Vec::new();
            tx.scan(table, low..=high, usize::MAX, &mut |key, row| {
                rows.push((key, decode(row)));
                true
            })?;
            Ok(Outcome::Rows(rows))
        }
        Op::Sleep(ms) => {
            std::thread::sleep(Duration::from_millis(ms));
            Ok(Outcome::Written)
        }
        Op::Commit | Op::Abort => unreachable!("the body handles commit and abort"),
    }
}

fn decode(row: &[u8]) -> i64 {
    i64::from_le_bytes(row[..8].try_into().expect("an 8-byte row"))
}

fn create_test_table(engine: &dyn Engine) -> TableId {
    let schema = TableSchema::new("test").column("value", ColumnType::I64);
    let table = engine.create_table(&schema).expect("create table `test`");
    let mut worker = engine.worker().expect("register a worker");
    worker
        .execute(&TxnOptions::default(), &mut |tx| {
            for (key, value) in INITIAL {
                tx.insert(table, key, &value.to_le_bytes())?;
            }
            Ok(())
        })
        .expect("load the initial rows");
    table
}

fn read_table(engine: &dyn Engine, table: TableId) -> BTreeMap<u64, i64> {
    let mut worker = engine.worker().expect("register a worker");
    worker
        .run(&TxnOptions::default(), |tx| {
            let mut rows = BTreeMap::new();
            tx.scan(table, 0..=MAX_KEY, usize::MAX, &mut |key, row| {
                rows.insert(key, decode(row));
                true
            })?;
            Ok(rows)
        })
        .expect("read the final table")
}

// ------------------------------------------------------------------ driver

/// A step sent to a transaction, and what became of it.
struct Step {
    txn: usize,
    text: String,
    blocked: bool,
    outcome: Option<Outcome>,
}

/// The transactions of one script run, and the steps sent to them.
struct Session {
    engine: Arc<dyn Engine>,
    table: TableId,
    commands: Vec<Sender<Op>>,
    threads: Vec<JoinHandle<TxnRecord>>,
    replies: Receiver<(usize, Reply)>,
    /// Per transaction, its steps not answered yet, oldest first.
    outstanding: Vec<VecDeque<usize>>,
    steps: Vec<Step>,
}

impl Session {
    /// Begin `txns` transactions, t1 first.
    fn start(engine: Arc<dyn Engine>, table: TableId, txns: usize) -> Session {
        let (reply_sender, replies) = mpsc::channel();
        let mut session = Session {
            engine,
            table,
            commands: Vec::new(),
            threads: Vec::new(),
            replies,
            outstanding: vec![VecDeque::new(); txns],
            steps: Vec::new(),
        };
        for txn in 0..txns {
            let (sender, receiver) = mpsc::channel();
            let (engine, replies) = (session.engine.clone(), reply_sender.clone());
            let thread = std::thread::Builder::new()
                .name(format!("hermitage-t{}", txn + 1))
                .spawn(move || run_txn(engine, table, txn, receiver, replies))
                .expect("spawn a transaction thread");
            match session.replies.recv_timeout(HANG_TIMEOUT) {
                Ok((t, Reply::Ready)) if t == txn => {}
                _ => panic!("t{} did not begin", txn + 1),
            }
            session.commands.push(sender);
            session.threads.push(thread);
        }
        session
    }

    /// Send `op` to `txn` and report what every transaction answered meanwhile.
    fn step(&mut self, txn: usize, op: Op, text: &str) -> Vec<String> {
        let id = self.steps.len();
        let text = text.to_string();
        self.steps.push(Step { txn, text, blocked: false, outcome: None });
        self.commands[txn].send(op).expect("a transaction thread outlives the script");
        self.outstanding[txn].push_back(id);
        let answered = self.collect(STEP_TIMEOUT);
        let mut lines = Vec::new();
        if answered.contains(&id) {
            lines.push(self.describe(id, ""));
        } else {
            self.steps[id].blocked = true;
            lines.push(format!("t{}: BLOCKED", txn + 1));
        }
        lines.extend(answered.iter().filter(|&&s| s != id).map(|&s| self.describe(s, "")));
        lines
    }

    fn describe(&self, id: usize, suffix: &str) -> String {
        let step = &self.steps[id];
        let outcome = step.outcome.as_ref().expect("an answered step");
        let unblocked = if step.blocked { " (unblocked)" } else { "" };
        format!("t{}: {outcome}{unblocked}{suffix}", step.txn + 1)
    }

    /// Receive answers until none is outstanding or `timeout` passes; the
    /// steps answered, in transaction order (arrival order is a race).
    fn collect(&mut self, timeout: Duration) -> Vec<usize> {
        let deadline = Instant::now() + timeout;
        let mut answered = Vec::new();
        while self.outstanding.iter().any(|q| !q.is_empty()) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left) {
                Ok((txn, Reply::Done(outcome))) => {
                    let id = self.outstanding[txn].pop_front().expect("an answer to a step");
                    self.steps[id].outcome = Some(outcome);
                    answered.push(id);
                }
                Ok((txn, Reply::Ready)) => panic!("t{} began twice", txn + 1),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        answered.sort_by_key(|&id| (self.steps[id].txn, id));
        answered
    }

    /// End the run: wait for blocked steps, end the transactions, read the
    /// table back, check serializability. Returns the `check` output.
    fn finish(mut self, cc: CcKind, not_promised: Option<&str>) -> (Vec<String>, Cell) {
        let mut lines: Vec<String> = Vec::new();
        let answered = self.collect(HANG_TIMEOUT);
        lines.extend(answered.iter().map(|&id| self.describe(id, " (at end)")));
        let hung: Vec<String> =
            self.outstanding.iter().flatten().map(|&id| self.quote(id)).collect();
        self.commands.clear();
        if !hung.is_empty() {
            // A thread stuck in the engine cannot be joined; leave it (and the engine).
            let detail =
                format!("still blocked {HANG_TIMEOUT:?} after the last step: {}", hung.join(", "));
            lines.push(format!("verdict: FAILED: {detail}"));
            return (lines, Cell { verdict: Verdict::Failed, detail });
        }
        let records: Vec<TxnRecord> = std::mem::take(&mut self.threads)
            .into_iter()
            .map(|t| t.join().expect("a transaction thread panicked"))
            .collect();
        let final_table = read_table(self.engine.as_ref(), self.table);
        let invariants = self.engine.check_invariants();
        let order = serial_order(&records, &final_table);
        let names = |txns: &[usize]| -> String {
            let names: Vec<String> = txns.iter().map(|t| format!("t{}", t + 1)).collect();
            if names.is_empty() { "none".into() } else { names.join(" ") }
        };
        let committed: Vec<usize> = (0..records.len()).filter(|&t| records[t].committed).collect();
        lines.push(format!("committed: {}", names(&committed)));
        let (aborts, blocks) = (self.aborts(), self.blocks());
        if !aborts.is_empty() {
            lines.push(format!("aborted: {}", aborts.join(", ")));
        }
        if !blocks.is_empty() {
            lines.push(format!("blocked: {}", blocks.join(", ")));
        }
        match &order {
            Some(order) => lines.push(format!("serial order: {}", names(order))),
            None => lines.push("serial order: NONE (not serializable)".into()),
        }
        lines.push(format!("final: {}", format_rows(&final_table.into_iter().collect::<Vec<_>>())));
        let mut failures = self.failures();
        failures.extend(invariants.err().map(|e| format!("check_invariants: {e}")));
        let unsupported = self.steps.iter().find_map(|s| match &s.outcome {
            Some(Outcome::Unsupported(m)) => Some(format!("`{}`: {m}", s.text)),
            _ => None,
        });
        let cell =
            classify(cc, order.as_deref(), &aborts, &blocks, failures, unsupported, not_promised);
        lines.push(format!("verdict: {}", cell.label()));
        (lines, cell)
    }

    fn quote(&self, id: usize) -> String {
        format!("`{}`", self.steps[id].text)
    }

    /// "`t2 commit` (read_validation)" for every step the engine aborted.
    fn aborts(&self) -> Vec<String> {
        (0..self.steps.len())
            .filter_map(|id| match &self.steps[id].outcome {
                Some(Outcome::Aborted(reason)) => {
                    Some(format!("{} ({})", self.quote(id), reason.name()))
                }
                _ => None,
            })
            .collect()
    }

    fn blocks(&self) -> Vec<String> {
        (0..self.steps.len())
            .filter(|&id| self.steps[id].blocked)
            .map(|id| self.quote(id))
            .collect()
    }

    /// Steps that returned an error no script expects (a bug somewhere).
    fn failures(&self) -> Vec<String> {
        (0..self.steps.len())
            .filter_map(|id| match &self.steps[id].outcome {
                Some(outcome @ Outcome::Failed(_)) => {
                    Some(format!("{}: {outcome}", self.quote(id)))
                }
                _ => None,
            })
            .collect()
    }
}

// ------------------------------------------------------------------- check

/// The first order (lexicographic) of the committed transactions whose replay
/// against the model explains every logged result and the final table.
fn serial_order(records: &[TxnRecord], final_table: &BTreeMap<u64, i64>) -> Option<Vec<usize>> {
    let committed: Vec<usize> = (0..records.len()).filter(|&t| records[t].committed).collect();
    permutations(&committed)
        .into_iter()
        .find(|order| replay(order, records).as_ref() == Some(final_table))
}

fn permutations(items: &[usize]) -> Vec<Vec<usize>> {
    if items.is_empty() {
        return vec![Vec::new()];
    }
    let mut all = Vec::new();
    for (i, &first) in items.iter().enumerate() {
        let rest: Vec<usize> =
            items.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &x)| x).collect();
        for mut tail in permutations(&rest) {
            tail.insert(0, first);
            all.push(tail);
        }
    }
    all
}

/// The table after running the logs of `order` serially; `None` when some
/// logged result is not what the serial run would return.
fn replay(order: &[usize], records: &[TxnRecord]) -> Option<BTreeMap<u64, i64>> {
    let mut model: BTreeMap<u64, i64> = INITIAL.into_iter().collect();
    for &txn in order {
        for (op, outcome) in &records[txn].log {
            if !model_step(&mut model, *op, outcome) {
                return None;
            }
        }
    }
    Some(model)
}

fn model_step(model: &mut BTreeMap<u64, i64>, op: Op, outcome: &Outcome) -> bool {
    match (op, outcome) {
        (Op::Get(key), Outcome::Value(value)) => model.get(&key) == value.as_ref(),
        (Op::Scan(low, high), Outcome::Rows(rows)) => {
            model.range(low..=high).map(|(&k, &v)| (k, v)).eq(rows.iter().copied())
        }
        (Op::Set(key, value), Outcome::Written) => {
            model.get_mut(&key).map(|v| *v = value).is_some()
        }
        (Op::Insert(key, value), Outcome::Written) => model.insert(key, value).is_none(),
        (Op::Delete(key), Outcome::Written) => model.remove(&key).is_some(),
        (Op::Set(key, _) | Op::Delete(key), Outcome::NotFound) => !model.contains_key(&key),
        (Op::Insert(key, _), Outcome::Duplicate) => model.contains_key(&key),
        (Op::Sleep(_), _) => true,
        _ => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Prevented {
        blocking: bool,
        abort: bool,
    },
    /// The anomaly happened; `promised` = the protocol claims to prevent it.
    Allowed {
        promised: bool,
    },
    NotApplicable,
    Failed,
}

/// One cell of the matrix: the verdict and why.
#[derive(Debug, Clone)]
struct Cell {
    verdict: Verdict,
    detail: String,
}

impl Cell {
    fn label(&self) -> String {
        match self.verdict {
            Verdict::Prevented { blocking: false, abort: false } => "prevented".into(),
            Verdict::Prevented { blocking: true, abort: false } => "prevented (blocking)".into(),
            Verdict::Prevented { blocking: false, abort: true } => "prevented (abort)".into(),
            Verdict::Prevented { blocking: true, abort: true } => {
                "prevented (blocking, abort)".into()
            }
            Verdict::Allowed { promised: true } => "ALLOWED".into(),
            Verdict::Allowed { promised: false } => "allowed (not promised)".into(),
            Verdict::NotApplicable => "n/a".into(),
            Verdict::Failed => "FAILED".into(),
        }
    }

    fn acceptable(&self) -> bool {
        !matches!(self.verdict, Verdict::Failed | Verdict::Allowed { promised: true })
    }
}

fn classify(
    cc: CcKind,
    order: Option<&[usize]>,
    aborts: &[String],
    blocks: &[String],
    failures: Vec<String>,
    unsupported: Option<String>,
    not_promised: Option<&str>,
) -> Cell {
    if !failures.is_empty() {
        return Cell { verdict: Verdict::Failed, detail: failures.join("; ") };
    }
    if let Some(detail) = unsupported {
        return Cell { verdict: Verdict::NotApplicable, detail };
    }
    let Some(order) = order else {
        let (promised, why) = match not_promised {
            Some(reason) => (false, format!("{} does not promise it: {reason}", cc.name())),
            None => (true, format!("{} claims serializability: a bug", cc.name())),
        };
        let detail =
            format!("no serial order of the committed transactions explains the history; {why}");
        return Cell { verdict: Verdict::Allowed { promised }, detail };
    };
    let order: Vec<String> = order.iter().map(|t| format!("t{}", t + 1)).collect();
    let mut parts = Vec::new();
    if !aborts.is_empty() {
        parts.push(format!("aborted at {}", aborts.join(" and ")));
    }
    if !blocks.is_empty() {
        parts.push(format!("blocked at {}", blocks.join(" and ")));
    }
    if parts.is_empty() {
        parts.push("nothing blocked or aborted".into());
    }
    parts.push(if order.is_empty() {
        "nothing committed".into()
    } else {
        format!("serial order {}", order.join(" → "))
    });
    let verdict = Verdict::Prevented { blocking: !blocks.is_empty(), abort: !aborts.is_empty() };
    Cell { verdict, detail: parts.join("; ") }
}

// ------------------------------------------------------------------ running

/// A script run under one protocol.
struct Run {
    cc: CcKind,
    /// The output of each block.
    outputs: Vec<Vec<String>>,
    cell: Cell,
}

struct ScriptResult {
    script: Script,
    runs: Vec<Run>,
    elapsed: Duration,
}

impl ScriptResult {
    /// The expected-output form of block `block`: one text when all protocols
    /// agree, otherwise each protocol's lines prefixed with `[name]`.
    fn merged_output(&self, block: usize) -> Vec<String> {
        let first = &self.runs[0].outputs[block];
        if self.runs.iter().all(|r| &r.outputs[block] == first) {
            return first.clone();
        }
        let prefixed = |r: &Run| -> Vec<String> {
            r.outputs[block].iter().map(|line| format!("[{}] {line}", r.cc.name())).collect()
        };
        self.runs.iter().flat_map(prefixed).collect()
    }

    fn history(&self) -> String {
        let mut outputs = Vec::new();
        for block in 0..self.runs[0].outputs.len() {
            outputs.push(self.merged_output(block));
        }
        self.script.render(&outputs)
    }
}

fn run_script(stem: &str) -> ScriptResult {
    let script = Script::load(stem);
    let started = Instant::now();
    let runs = CcKind::ALL.into_iter().map(|cc| run_protocol(&script, cc)).collect();
    ScriptResult { script, runs, elapsed: started.elapsed() }
}

fn run_protocol(script: &Script, cc: CcKind) -> Run {
    run_design(script, EngineKind::Zen, cc)
}

/// A script on engine `engine` (Zen, or a baseline with its one protocol).
fn run_design(script: &Script, engine: EngineKind, cc: CcKind) -> Run {
    let config = EngineConfig {
        engine,
        pmem: BackendKind::Dram,
        pool_size_bytes: 64 << 20,
        page_size_bytes: 64 << 10,
        max_workers: 8,
        cache_size_bytes: 8 << 20,
        cc,
        ..Default::default()
    };
    let engine: Arc<dyn Engine> = Arc::from(zen_engine::open(&config).expect("open an engine"));
    let table = create_test_table(engine.as_ref());
    let mut session = Some(Session::start(engine, table, script.txns));
    let mut outputs = Vec::new();
    let mut cell = None;
    for (commands, _) in script.blocks() {
        let mut lines = Vec::new();
        for (text, command) in commands {
            match command {
                Command::Step { txn, op } => {
                    let session = session.as_mut().expect("steps come before `check`");
                    lines.extend(session.step(*txn, *op, text));
                }
                Command::NotPromised { .. } => {}
                Command::Check => {
                    let session = session.take().expect("one `check`");
                    let (check_lines, checked) = session.finish(cc, script.not_promised(cc));
                    lines.extend(check_lines);
                    cell = Some(checked);
                }
            }
        }
        outputs.push(lines);
    }
    Run { cc, outputs, cell: cell.expect("the script ends with `check`") }
}

/// Each script runs once per test process (the per-script tests and the
/// matrix share the result), and one at a time, so that a busy machine does
/// not turn a slow step into a false BLOCKED.
fn script_result(stem: &'static str) -> Arc<ScriptResult> {
    static RESULTS: Mutex<BTreeMap<&str, Arc<ScriptResult>>> = Mutex::new(BTreeMap::new());
    let mut results = RESULTS.lock().unwrap_or_else(PoisonError::into_inner);
    results.entry(stem).or_insert_with(|| Arc::new(run_script(stem))).clone()
}

/// The test of one script: every cell acceptable, output as expected.
/// `UPDATE_GOLDENFILES=1` records the output first, whatever the verdict.
fn check_script(stem: &'static str) {
    let result = script_result(stem);
    let history = result.history();
    println!("{history}");
    let update = env_flag("UPDATE_GOLDENFILES");
    if update {
        std::fs::write(&result.script.path, &history).expect("rewrite the script");
    }
    for run in &result.runs {
        assert!(
            run.cell.acceptable(),
            "{stem} under {}: {}: {}\n\nhistory:\n{history}",
            run.cc.name(),
            run.cell.label(),
            run.cell.detail
        );
    }
    if update {
        return;
    }
    for (block, (_, expected)) in result.script.blocks().enumerate() {
        let actual = result.merged_output(block);
        assert!(
            expected == actual.as_slice(),
            "{}: block {} differs (UPDATE_GOLDENFILES=1 rewrites it)\nexpected:\n{}\nactual:\n{}",
            result.script.path.display(),
            block + 1,
            expected.join("\n"),
            actual.join("\n")
        );
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| v == "1")
}

/// The check itself, on hand-made logs: a lost update (both read 10, both
/// commit) has no serial order; the same two transactions run one after the
/// other have one.
#[test]
fn the_check_rejects_a_lost_update_and_accepts_a_serial_run() {
    let increment = |read: i64, write: i64| TxnRecord {
        log: vec![(Op::Get(1), Outcome::Value(Some(read))), (Op::Set(1, write), Outcome::Written)],
        committed: true,
    };
    let table = |value: i64| BTreeMap::from([(1, value), (2, 20)]);
    assert_eq!(serial_order(&[increment(10, 11), increment(10, 12)], &table(12)), None);
    assert_eq!(serial_order(&[increment(11, 12), increment(10, 11)], &table(12)), Some(vec![1, 0]));
}

/// Aborted transactions are left out of the orders, but a committed read of
/// their write (G1a) and a phantom in a scan are caught.
#[test]
fn the_check_catches_aborted_reads_and_phantoms() {
    let writer = TxnRecord { log: vec![(Op::Set(1, 101), Outcome::Written)], committed: false };
    let reader = TxnRecord { log: vec![(Op::Get(1), Outcome::Value(Some(101)))], committed: true };
    let initial: BTreeMap<u64, i64> = INITIAL.into_iter().collect();
    assert_eq!(serial_order(&[writer, reader], &initial), None);
    let scans = |rows: Vec<(u64, i64)>| TxnRecord {
        log: vec![
            (Op::Scan(1, 9), Outcome::Rows(vec![(1, 10), (2, 20)])),
            (Op::Scan(1, 9), Outcome::Rows(rows)),
        ],
        committed: true,
    };
    let inserter = TxnRecord { log: vec![(Op::Insert(3, 30), Outcome::Written)], committed: true };
    let with_3 = BTreeMap::from([(1, 10), (2, 20), (3, 30)]);
    let phantom = scans(vec![(1, 10), (2, 20), (3, 30)]);
    assert_eq!(serial_order(&[phantom, inserter], &with_3), None);
    let inserter = TxnRecord { log: vec![(Op::Insert(3, 30), Outcome::Written)], committed: true };
    let repeatable = scans(vec![(1, 10), (2, 20)]);
    assert_eq!(serial_order(&[repeatable, inserter], &with_3), Some(vec![0, 1]));
}

/// The driver itself: a step that stalls past `STEP_TIMEOUT` is BLOCKED, the
/// other transaction goes on, the late answer is collected and reported, and
/// the cell reads "(blocking)". No protocol of ours blocks that long yet.
#[test]
fn a_stalled_step_is_reported_blocked_then_unblocked() {
    let text = "t1 set 1 11\nt1 sleep 600\nt2 get 2\nt1 commit\nt2 commit\ncheck\n";
    let script = Script::parse(PathBuf::from("inline"), text);
    let run = run_protocol(&script, CcKind::ALL[0]);
    let expected = [
        "t1: ok",
        "t1: BLOCKED",
        "t2: 20",
        "t1: ok (unblocked)",
        "t1: committed",
        "t2: committed",
        "committed: t1 t2",
        "blocked: `t1 sleep 600`",
        "serial order: t1 t2",
        "final: [1=11 2=20]",
        "verdict: prevented (blocking)",
    ];
    assert_eq!(run.outputs, [expected.map(String::from).to_vec()]);
    assert_eq!(run.cell.verdict, Verdict::Prevented { blocking: true, abort: false });
}

// ------------------------------------------------------------------- matrix

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/isolation.md")
}

/// The generated section of `docs/isolation.md`: the matrix and every cell's reason.
fn matrix_section(results: &[(&str, Arc<ScriptResult>)]) -> String {
    let mut s = String::new();
    s.push_str("| anomaly |");
    for cc in CcKind::ALL {
        s.push_str(&format!(" {} |", cc.name()));
    }
    s.push_str("\n| --- |");
    s.push_str(&" --- |".repeat(CcKind::ALL.len()));
    s.push('\n');
    for (name, result) in results {
        s.push_str(&format!("| {name} |"));
        for run in &result.runs {
            s.push_str(&format!(" {} |", run.cell.label()));
        }
        s.push('\n');
    }
    s.push_str("\nWhy, cell by cell (steps are quoted from the scripts):\n\n");
    for ((name, result), (stem, _)) in results.iter().zip(SCRIPTS) {
        for run in &result.runs {
            s.push_str(&format!(
                "- **{name} × {}** ([`{stem}.script`](../crates/zen-engine/tests/hermitage/{stem}.script)): {}: {}.\n",
                run.cc.name(),
                run.cell.label(),
                run.cell.detail
            ));
        }
    }
    s
}

/// The text between the markers of `doc`, if both are there.
fn generated_part(doc: &str) -> Option<(usize, usize)> {
    let begin = doc.find(DOC_BEGIN)? + DOC_BEGIN.len();
    let end = begin + doc[begin..].find(DOC_END)?;
    Some((begin, end))
}

#[test]
fn hermitage_scripts_are_all_listed() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hermitage");
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("read tests/hermitage")
        .map(|e| e.expect("a directory entry").file_name().to_string_lossy().into_owned())
        .filter_map(|name| name.strip_suffix(".script").map(str::to_string))
        .collect();
    let listed: BTreeSet<String> = SCRIPTS.iter().map(|(stem, _)| stem.to_string()).collect();
    assert_eq!(on_disk, listed, "every script needs an entry in SCRIPTS and a test");
}

#[test]
fn hermitage_matrix_matches_docs() {
    let started = Instant::now();
    let results: Vec<(&str, Arc<ScriptResult>)> =
        SCRIPTS.iter().map(|&(stem, name)| (name, script_result(stem))).collect();
    let section = matrix_section(&results);
    println!("{section}");
    for (name, result) in &results {
        println!("{name}: {:?} for {} protocols", result.elapsed, result.runs.len());
    }
    println!(
        "matrix ready in {:?} (scripts run once, shared with the per-script tests)",
        started.elapsed()
    );
    let bad: Vec<String> = results
        .iter()
        .flat_map(|(name, r)| r.runs.iter().map(move |run| (name, run)))
        .filter(|(_, run)| !run.cell.acceptable())
        .map(|(name, run)| {
            format!("{name} × {}: {}: {}", run.cc.name(), run.cell.label(), run.cell.detail)
        })
        .collect();
    let path = doc_path();
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = format!("\n{section}");
    let documented = generated_part(&doc);
    if env_flag("ZEN_WRITE_ISOLATION_DOC") {
        // Record what was measured, anomalies included, before failing on them.
        let new_doc = match documented {
            Some((begin, end)) => format!("{}{generated}{}", &doc[..begin], &doc[end..]),
            None => format!("{}{DOC_BEGIN}{generated}{DOC_END}\n", doc_intro()),
        };
        std::fs::write(&path, new_doc).expect("write docs/isolation.md");
    }
    assert!(bad.is_empty(), "anomalies or failures:\n{}", bad.join("\n"));
    if env_flag("ZEN_WRITE_ISOLATION_DOC") {
        return;
    }
    let (begin, end) = documented.unwrap_or_else(|| {
        panic!("{}: no generated matrix; run with ZEN_WRITE_ISOLATION_DOC=1", path.display())
    });
    assert!(
        doc[begin..end] == generated,
        "{}: the matrix differs from what was measured; run with ZEN_WRITE_ISOLATION_DOC=1\n\
         documented:{}\nmeasured:{generated}",
        path.display(),
        &doc[begin..end]
    );
}

/// The prose of a new `docs/isolation.md` above the matrix. Everything outside
/// the markers is kept when the matrix is regenerated, so edit it in the doc.
fn doc_intro() -> &'static str {
    "# Isolation: the Hermitage suite

Every concurrency-control protocol of every engine runs the ten isolation
anomalies of [Hermitage](https://github.com/ept/hermitage) (G0, G1a, G1b, G1c,
OTV, PMP, P4, G-single, G2-item, G2), each as Hermitage's interleaving of two or
three transactions on the table `test(id, value)` = {(1, 10), (2, 20)}. Our
protocols claim serializability, so every cell must read *prevented*; an
anomaly fails `cargo test`.

## Method

Each anomaly is a golden script in
[`crates/zen-engine/tests/hermitage/`](../crates/zen-engine/tests/hermitage/):
prose, the steps (`t1 set 1 11`, `t2 scan 1 9`, `t1 commit`, ...) and the output
expected after `---`, one Rust test per script
([`hermitage.rs`](../crates/zen-engine/tests/hermitage.rs)). Every transaction
runs on its own thread with its own worker, inside a single
`EngineWorker::execute` (one attempt; aborts are never retried), and receives
its steps one at a time over a channel, so it stays open across the other
transactions' steps; all transactions begin before the first step, t1 first. A
step that does not answer within 500 ms is *BLOCKED* (the driver goes on and
collects the answer later); an `Error::Abort(reason)` is *ABORTED (reason)*.
Each transaction logs what every read, scan and write returned. The verdict is
not read off the anomaly's name but checked: for every order of the committed
transactions (at most 3! = 6) the logs are replayed against a `BTreeMap` holding
the initial table, and some order must reproduce every logged result and the
final table read back from the engine. If none does, the history is not
serializable and the cell is *ALLOWED* (acceptable only where a script declares,
with a reason, that the protocol does not promise to prevent that anomaly;
none does). Otherwise the cell is *prevented*, *(blocking)* when a step
blocked, *(abort)* when the engine aborted a transaction, and plain when the
interleaving ran without either and still serialized (a snapshot read, a
buffered write). Hermitage's predicates on `value` become scans of the whole id
range evaluated by the client, since the engine offers key ranges, not
predicates. Not checked: what transactions that end aborted have read
(opacity), and interleavings other than Hermitage's (left to the randomized
serializability checker). Where protocols differ in a step, the scripts show
each protocol's output, prefixed `[name]`. The last row is not Hermitage's: see
the notes.

Regenerate the matrix with
`ZEN_WRITE_ISOLATION_DOC=1 cargo test --release -p zen-engine --test hermitage`
(the test without the variable fails if this section no longer matches what it
measures), and the scripts' expected output with `UPDATE_GOLDENFILES=1`.

## Matrix

"
}

/// The falcon engine (rows in NVM updated in place) runs every script too,
/// with each protocol it runs on the shared OCC core (Silo, no-wait, MVCC):
/// each anomaly prevented. Its cells are not in the matrix (that is
/// protocol × anomaly on Zen); they are asserted here.
#[test]
fn falcon_prevents_every_anomaly() {
    let mut failures = Vec::new();
    let protocols = EngineKind::Falcon.supported_cc();
    assert!(protocols.len() >= 3, "falcon runs Silo, a 2PL and an MVCC protocol");
    for &cc in protocols {
        for (stem, _) in SCRIPTS {
            let script = Script::load(stem);
            let run = run_design(&script, EngineKind::Falcon, cc);
            if !run.cell.acceptable() {
                let (label, detail) = (run.cell.label(), &run.cell.detail);
                failures.push(format!("{}/{stem}: {label}: {detail}", cc.name()));
            }
        }
    }
    assert!(failures.is_empty(), "falcon:\n{}", failures.join("\n"));
}
