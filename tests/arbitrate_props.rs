//! The `arbitrate` line reader never panics: arbitrary bytes and mutated
//! valid logs go through `replay` (in process), every output line is a
//! valid server message, and every skipped line is reported.

use herdsim::floor::{Config, PolicyKind, ServerMsg};
use herdsim::replay::{parse_line, replay};
use proptest::prelude::*;

const VALID_LOG: &str = include_str!("data/arbitrate/example.jsonl");

fn run(policy: PolicyKind, input: &[u8]) -> Result<(), TestCaseError> {
    let mut cfg = Config::for_policy(policy);
    cfg.ttl_ms = 3000;
    cfg.enabled = true;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let summary =
        replay(cfg, input, &mut out, &mut err).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(summary.bad_lines <= summary.lines);
    let err = String::from_utf8_lossy(&err);
    prop_assert_eq!(err.lines().count() as u64, summary.bad_lines);
    for l in err.lines() {
        prop_assert!(l.starts_with("line "), "{}", l);
    }
    let out = String::from_utf8_lossy(&out);
    for l in out.lines() {
        let v: serde_json::Value =
            serde_json::from_str(l).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(v["at_ms"].is_u64() && v["to"].is_string());
        prop_assert!(ServerMsg::from_value(&v["msg"]).is_ok(), "{}", l);
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    DupLine(usize),
}

fn mutate(mut bytes: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let n = bytes.len();
        match *m {
            Mutation::Flip(i, b) if n > 0 => bytes[i % n] ^= b | 1,
            Mutation::Insert(i, b) => bytes.insert(i % (n + 1), b),
            Mutation::Delete(i) if n > 0 => {
                bytes.remove(i % n);
            }
            Mutation::DupLine(i) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let l = lines[i % lines.len()].to_string();
                    bytes.extend_from_slice(l.as_bytes());
                    bytes.push(b'\n');
                }
            }
            _ => {}
        }
    }
    bytes
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    proptest::collection::vec(
        prop_oneof![
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
            (
                any::<usize>(),
                proptest::sample::select(b"{}[]\",:0-9.e#@\\ \n-".to_vec())
            )
                .prop_map(|(i, b)| Mutation::Insert(i, b)),
            any::<usize>().prop_map(Mutation::Delete),
            any::<usize>().prop_map(Mutation::DupLine),
        ],
        1..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn arbitrate_reader_never_panics_on_arbitrary_bytes(
        policy in proptest::sample::select(PolicyKind::ALL.to_vec()),
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let _ = parse_line(&bytes);
        run(policy, &bytes)?;
    }

    #[test]
    fn arbitrate_reader_never_panics_on_mutated_logs(
        policy in proptest::sample::select(PolicyKind::ALL.to_vec()),
        muts in mutations(),
    ) {
        let bytes = mutate(VALID_LOG.as_bytes().to_vec(), &muts);
        for line in bytes.split(|&b| b == b'\n') {
            let _ = parse_line(line);
        }
        run(policy, &bytes)?;
    }
}

#[test]
fn valid_log_has_no_bad_lines() {
    for p in PolicyKind::ALL {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let s = replay(
            Config::for_policy(p),
            VALID_LOG.as_bytes(),
            &mut out,
            &mut err,
        );
        assert_eq!(s.map(|s| s.bad_lines).ok(), Some(0));
        assert!(err.is_empty());
    }
}
