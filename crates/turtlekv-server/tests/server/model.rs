//! A random sequence of commands, pipelined, against the server and
//! against a model (a map in the test): every reply and the final
//! contents must agree.

use std::collections::BTreeMap;

use redis::{Value, cmd};

use crate::harness::Server;

/// xorshift64*: reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A value Redis takes as an integer: exactly the decimal form of one
/// (no sign but `-`, no leading zeros, no `-0`).
fn redis_integer(v: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(v).ok()?;
    let n: i64 = text.parse().ok()?;
    (n.to_string() == text).then_some(n)
}

fn bulk(v: Option<&Vec<u8>>) -> Value {
    v.map_or(Value::Nil, |v| Value::BulkString(v.clone()))
}

#[test]
fn random_commands_agree_with_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sync", "no"]);
    let mut c = server.client();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    // Pipelines of 1 to 32 requests, so that runs of SETs, GETs and
    // counters are coalesced as well as run alone.
    let mut pipe = redis::pipe();
    let mut expected_replies = Vec::new();
    let mut pipeline_len = 1;
    for step in 0..5000 {
        let key = format!("k{}", rng.below(40)).into_bytes();
        let value = format!("{}", rng.below(1000)).into_bytes();
        let (command, expected): (redis::Cmd, Value) = match rng.below(10) {
            0 => (cmd("GET").arg(&key).clone(), bulk(model.get(&key))),
            1 => {
                model.insert(key.clone(), value.clone());
                (cmd("SET").arg(&key).arg(&value).clone(), Value::Okay)
            }
            2 => {
                let existed = model.remove(&key).is_some();
                (cmd("DEL").arg(&key).clone(), Value::Int(i64::from(existed)))
            }
            3 => {
                let old = model.insert(key.clone(), value.clone());
                (
                    cmd("GETSET").arg(&key).arg(&value).clone(),
                    bulk(old.as_ref()),
                )
            }
            4 => {
                let absent = !model.contains_key(&key);
                if absent {
                    model.insert(key.clone(), value.clone());
                }
                (
                    cmd("SETNX").arg(&key).arg(&value).clone(),
                    Value::Int(i64::from(absent)),
                )
            }
            5 => {
                let entry = model.entry(key.clone()).or_default();
                entry.extend_from_slice(&value);
                let len = i64::try_from(entry.len()).unwrap();
                (cmd("APPEND").arg(&key).arg(&value).clone(), Value::Int(len))
            }
            6 => {
                let delta = i64::try_from(rng.below(100)).unwrap() - 50;
                let expected = match model.get(&key) {
                    None => Some(delta),
                    Some(v) => redis_integer(v).map(|n| n + delta),
                };
                match expected {
                    Some(n) => {
                        model.insert(key.clone(), n.to_string().into_bytes());
                        (cmd("INCRBY").arg(&key).arg(delta).clone(), Value::Int(n))
                    }
                    // Not a number: the error reply is tested elsewhere,
                    // and an error would end a pipeline's query here.
                    None => (cmd("STRLEN").arg(&key).clone(), {
                        Value::Int(i64::try_from(model[&key].len()).unwrap())
                    }),
                }
            }
            7 => {
                let other = format!("k{}", rng.below(40)).into_bytes();
                model.insert(key.clone(), value.clone());
                model.insert(other.clone(), value.clone());
                (
                    cmd("MSET")
                        .arg(&key)
                        .arg(&value)
                        .arg(&other)
                        .arg(&value)
                        .clone(),
                    Value::Okay,
                )
            }
            8 => {
                let other = format!("k{}", rng.below(40)).into_bytes();
                let values = vec![bulk(model.get(&key)), bulk(model.get(&other))];
                (
                    cmd("MGET").arg(&key).arg(&other).clone(),
                    Value::Array(values),
                )
            }
            _ => {
                let n = i64::from(model.contains_key(&key));
                (cmd("EXISTS").arg(&key).clone(), Value::Int(n))
            }
        };
        pipe.add_command(command);
        expected_replies.push(expected);
        if expected_replies.len() == pipeline_len {
            let got: Vec<Value> = pipe.query(&mut c).unwrap();
            assert_eq!(got, expected_replies, "pipeline ending at step {step}");
            pipe = redis::pipe();
            expected_replies.clear();
            pipeline_len = 1 + usize::try_from(rng.below(32)).unwrap();
        }
    }
    if !expected_replies.is_empty() {
        let got: Vec<Value> = pipe.query(&mut c).unwrap();
        assert_eq!(got, expected_replies);
    }
    let mut keys: Vec<Vec<u8>> = cmd("KEYS").arg("*").query(&mut c).unwrap();
    keys.sort();
    assert_eq!(keys, model.keys().cloned().collect::<Vec<_>>());
}
