//! The two record formats of `dump` and `load` (and `scan --json`).
//!
//! JSON Lines: one object per line with one key field and one value field.
//! `key`/`value` hold the bytes as a JSON string (so they must be UTF-8);
//! `key_base64`/`value_base64` and `key_hex`/`value_hex` hold any bytes.
//!
//! CSV: a header row names the columns with the same field names, and
//! tells how every cell of that column is encoded; plain `key`/`value`
//! cells are taken byte for byte. Quoting is RFC 4180 (the `csv` crate), so
//! commas, quotes and line breaks in text survive.

use std::io::{BufRead, Write};

use anyhow::{Context as _, Result, anyhow, bail};
use clap::ValueEnum;
use serde_json::Value;

use crate::encoding::{Encoding, encode_base64, encode_hex};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// JSON Lines: `{"key": "...", "value": "..."}` per line.
    Jsonl,
    /// CSV with a header row: `key,value`.
    Csv,
}

/// How one column (or field) holds its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldEncoding {
    /// Bytes as they are (JSON: a string, so UTF-8 only).
    Plain,
    Base64,
    Hex,
}

impl FieldEncoding {
    /// `forced` hex or base64 wins; otherwise plain when the bytes (all of
    /// the column's bytes, for CSV) are UTF-8, else base64.
    fn choose(forced: Encoding, utf8: bool) -> FieldEncoding {
        match forced {
            Encoding::Hex => FieldEncoding::Hex,
            Encoding::Base64 => FieldEncoding::Base64,
            Encoding::Utf8 if utf8 => FieldEncoding::Plain,
            Encoding::Utf8 => FieldEncoding::Base64,
        }
    }

    /// The field name for `base` (`key` or `value`) in this encoding.
    fn field_name(self, base: &str) -> String {
        match self {
            FieldEncoding::Plain => base.to_string(),
            FieldEncoding::Base64 => format!("{base}_base64"),
            FieldEncoding::Hex => format!("{base}_hex"),
        }
    }

    /// Parses a field name into (`key` or `value`, encoding).
    fn parse_field_name(name: &str) -> Option<(Part, FieldEncoding)> {
        let (base, encoding) = match name.split_once('_') {
            None => (name, FieldEncoding::Plain),
            Some((base, "base64")) => (base, FieldEncoding::Base64),
            Some((base, "hex")) => (base, FieldEncoding::Hex),
            Some(_) => return None,
        };
        let part = match base {
            "key" => Part::Key,
            "value" => Part::Value,
            _ => return None,
        };
        Some((part, encoding))
    }

    fn encode_text(self, bytes: &[u8]) -> String {
        match self {
            FieldEncoding::Plain => String::from_utf8_lossy(bytes).into_owned(),
            FieldEncoding::Base64 => encode_base64(bytes),
            FieldEncoding::Hex => encode_hex(bytes),
        }
    }

    fn decode(self, cell: &[u8]) -> Result<Vec<u8>, String> {
        let text = || std::str::from_utf8(cell).map_err(|_| "is not UTF-8".to_string());
        match self {
            FieldEncoding::Plain => Ok(cell.to_vec()),
            FieldEncoding::Base64 => Encoding::Base64.decode(text()?),
            FieldEncoding::Hex => Encoding::Hex.decode(text()?),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Key,
    Value,
}

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Key => "key",
            Part::Value => "value",
        }
    }
}

const FIELD_HELP: &str =
    "expected one of key, key_base64, key_hex and one of value, value_base64, value_hex";

/// One JSON Lines line (without the newline). With `forced` hex or
/// base64, every field uses that encoding; otherwise bytes that are UTF-8
/// are a plain string and anything else is base64.
pub fn json_line(key: &[u8], value: &[u8], forced: Encoding) -> String {
    let field = |bytes: &[u8], base: &str| {
        let encoding = FieldEncoding::choose(forced, std::str::from_utf8(bytes).is_ok());
        let name = encoding.field_name(base);
        let text = encoding.encode_text(bytes);
        // Serialising a string cannot fail.
        let text = serde_json::to_string(&text).unwrap_or_default();
        format!("\"{name}\":{text}")
    };
    format!("{{{},{}}}", field(key, "key"), field(value, "value"))
}

/// Parses one JSON Lines line into (key, value).
pub fn parse_json_line(line: &str) -> Result<(Vec<u8>, Vec<u8>), String> {
    // A list of fields, not a map: a map would keep only the last of two
    // `key` fields and hide the mistake.
    let Fields(object) =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let mut key = None;
    let mut value = None;
    for (name, field) in &object {
        let (part, encoding) = FieldEncoding::parse_field_name(name)
            .ok_or_else(|| format!("unknown field {name:?}: {FIELD_HELP}"))?;
        let Value::String(text) = field else {
            return Err(format!("field {name:?} must be a string"));
        };
        let bytes = encoding
            .decode(text.as_bytes())
            .map_err(|e| format!("field {name:?}: {e}"))?;
        let slot = match part {
            Part::Key => &mut key,
            Part::Value => &mut value,
        };
        if slot.replace(bytes).is_some() {
            return Err(format!("more than one {} field: {FIELD_HELP}", part.name()));
        }
    }
    match (key, value) {
        (Some(k), Some(v)) => Ok((k, v)),
        (None, _) => Err(format!("no key field: {FIELD_HELP}")),
        (_, None) => Err(format!("no value field: {FIELD_HELP}")),
    }
}

/// A JSON object's fields in order, duplicates kept.
struct Fields(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Fields, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    fields.push(entry);
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// Reads every record of `input`, calling `visit(key, value, line)` with
/// the line the record starts on.
pub fn read_records(
    format: Format,
    input: impl BufRead,
    visit: &mut dyn FnMut(Vec<u8>, Vec<u8>, u64) -> Result<()>,
) -> Result<()> {
    match format {
        Format::Jsonl => read_json_lines(input, visit),
        Format::Csv => read_csv(input, visit),
    }
}

fn read_json_lines(
    mut input: impl BufRead,
    visit: &mut dyn FnMut(Vec<u8>, Vec<u8>, u64) -> Result<()>,
) -> Result<()> {
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        if input
            .read_until(b'\n', &mut line)
            .context("reading the input")?
            == 0
        {
            return Ok(());
        }
        number += 1;
        let text = std::str::from_utf8(&line)
            .map_err(|_| anyhow!("line {number}: not UTF-8 (JSON must be)"))?;
        // A byte order mark, as some editors save, is no part of the JSON.
        let text = if number == 1 {
            text.strip_prefix('\u{feff}').unwrap_or(text)
        } else {
            text
        };
        if text.trim().is_empty() {
            continue;
        }
        let (key, value) = parse_json_line(text).map_err(|e| anyhow!("line {number}: {e}"))?;
        visit(key, value, number)?;
    }
}

fn read_csv(
    input: impl BufRead,
    visit: &mut dyn FnMut(Vec<u8>, Vec<u8>, u64) -> Result<()>,
) -> Result<()> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(input);
    let headers = reader
        .byte_headers()
        .context("reading the CSV header")?
        .clone();
    let columns = csv_columns(&headers)?;
    let mut record = csv::ByteRecord::new();
    loop {
        let more = reader
            .read_byte_record(&mut record)
            .map_err(|e| anyhow!("CSV: {e}"))?;
        if !more {
            return Ok(());
        }
        let line = record.position().map_or(0, |p| p.line());
        let cell = |(index, encoding): (usize, FieldEncoding), name: &str| {
            encoding
                .decode(&record[index])
                .map_err(|e| anyhow!("line {line}: {name} column: {e}"))
        };
        let key = cell(columns.0, "key")?;
        let value = cell(columns.1, "value")?;
        visit(key, value, line)?;
    }
}

type Column = (usize, FieldEncoding);

/// Finds the key and value columns in a CSV header.
fn csv_columns(headers: &csv::ByteRecord) -> Result<(Column, Column)> {
    let mut key = None;
    let mut value = None;
    for (index, name) in headers.iter().enumerate() {
        let name = String::from_utf8_lossy(name);
        let Some((part, encoding)) = FieldEncoding::parse_field_name(name.trim()) else {
            bail!(
                "CSV header: unknown column {name:?}; the first row must name the columns, \
                 e.g. `key,value` ({FIELD_HELP})"
            );
        };
        let slot = match part {
            Part::Key => &mut key,
            Part::Value => &mut value,
        };
        if slot.replace((index, encoding)).is_some() {
            bail!("CSV header: two {} columns ({FIELD_HELP})", part.name());
        }
    }
    match (key, value) {
        (Some(k), Some(v)) => Ok((k, v)),
        _ => {
            bail!("CSV header must name a key and a value column, e.g. `key,value` ({FIELD_HELP})")
        }
    }
}

/// Writes records as CSV, with the header and cell encodings chosen up
/// front.
#[derive(Debug)]
pub struct CsvWriter<W: Write> {
    writer: csv::Writer<W>,
    key: FieldEncoding,
    value: FieldEncoding,
}

impl<W: Write> CsvWriter<W> {
    /// `utf8_keys`/`utf8_values`: every key (value) is UTF-8, so its
    /// column can be text. A forced hex or base64 overrides both.
    pub fn new(out: W, forced: Encoding, utf8_keys: bool, utf8_values: bool) -> Result<Self> {
        let key = FieldEncoding::choose(forced, utf8_keys);
        let value = FieldEncoding::choose(forced, utf8_values);
        let mut writer = csv::Writer::from_writer(out);
        writer
            .write_record([key.field_name("key"), value.field_name("value")])
            .map_err(csv_error)?;
        Ok(CsvWriter { writer, key, value })
    }

    pub fn write(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let cell = |encoding: FieldEncoding, bytes: &[u8]| match encoding {
            FieldEncoding::Plain => bytes.to_vec(),
            other => other.encode_text(bytes).into_bytes(),
        };
        self.writer
            .write_record([cell(self.key, key), cell(self.value, value)])
            .map_err(csv_error)?;
        Ok(())
    }

    pub fn finish(mut self) -> Result<W> {
        self.writer.flush()?;
        self.writer.into_inner().map_err(|e| e.into_error().into())
    }
}

/// Unwraps the I/O error inside a CSV write error, so that a closed pipe
/// is recognised as one.
fn csv_error(err: csv::Error) -> anyhow::Error {
    match err.into_kind() {
        csv::ErrorKind::Io(io) => io.into(),
        other => anyhow!("CSV: {other:?}"),
    }
}

/// Guesses the format of a file to load: by extension, else by its first
/// non-blank byte (`{` means JSON Lines).
pub fn detect_format(path: &str, input: &mut impl BufRead) -> Result<Format> {
    let extension = std::path::Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("jsonl" | "ndjson" | "json") => return Ok(Format::Jsonl),
        Some("csv") => return Ok(Format::Csv),
        _ => {}
    }
    let buffer = input.fill_buf().context("reading the input")?;
    let buffer = buffer.strip_prefix(b"\xef\xbb\xbf").unwrap_or(buffer);
    let first = buffer.iter().find(|b| !b.is_ascii_whitespace());
    // No records at all (what `dump` writes for an empty database) is an
    // empty JSON Lines file, not a CSV file without its header.
    Ok(match first {
        None | Some(b'{') => Format::Jsonl,
        Some(_) => Format::Csv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_round_trip_text_and_binary() {
        let cases: [(&[u8], &[u8]); 4] = [
            (b"apple", b"red"),
            (b"tab\there \"quoted\" \n nul\0", b""),
            (&[0xff, 0xfe, 0], &[0x80]),
            ("ключ".as_bytes(), b"v"),
        ];
        for (key, value) in cases {
            for forced in [Encoding::Utf8, Encoding::Hex, Encoding::Base64] {
                let line = json_line(key, value, forced);
                assert!(!line.contains('\n'), "{line}");
                assert_eq!(
                    parse_json_line(&line).unwrap(),
                    (key.to_vec(), value.to_vec())
                );
            }
        }
        assert_eq!(
            json_line(b"a", &[0xff], Encoding::Utf8),
            r#"{"key":"a","value_base64":"/w=="}"#
        );
    }

    #[test]
    fn bad_json_lines_say_what_is_wrong() {
        for (line, expected) in [
            ("[1]", "not a JSON object"),
            (r#"{"key":"a"}"#, "no value field"),
            (r#"{"value":"a"}"#, "no key field"),
            (
                r#"{"key":"a","key_hex":"00","value":""}"#,
                "more than one key",
            ),
            (r#"{"key":"a","value":1}"#, "must be a string"),
            (r#"{"key":"a","colour":"red","value":""}"#, "unknown field"),
            (r#"{"key_hex":"zz","value":""}"#, "hex"),
        ] {
            let err = parse_json_line(line).unwrap_err();
            assert!(err.contains(expected), "{line}: {err}");
        }
    }

    #[test]
    fn csv_round_trips_with_chosen_columns() {
        let records: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"a,b".to_vec(), b"line\nbreak \"q\"".to_vec()),
            (vec![0, 0xff], vec![]),
        ];
        for (forced, plain) in [
            (Encoding::Utf8, false),
            (Encoding::Hex, true),
            (Encoding::Base64, true),
        ] {
            let mut writer = CsvWriter::new(Vec::new(), forced, plain, plain).unwrap();
            for (k, v) in &records {
                writer.write(k, v).unwrap();
            }
            let bytes = writer.finish().unwrap();
            let mut back = Vec::new();
            read_records(Format::Csv, bytes.as_slice(), &mut |k, v, _| {
                back.push((k, v));
                Ok(())
            })
            .unwrap();
            assert_eq!(back, records, "{}", String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn csv_needs_a_header() {
        let err = read_records(
            Format::Csv,
            b"apple,red\n".as_slice(),
            &mut |_, _, _| Ok(()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown column"), "{err}");
        let text = b"value,key\nred,apple\n";
        let mut back = Vec::new();
        read_records(Format::Csv, text.as_slice(), &mut |k, v, line| {
            back.push((k, v, line));
            Ok(())
        })
        .unwrap();
        assert_eq!(back, vec![(b"apple".to_vec(), b"red".to_vec(), 2)]);
    }

    #[test]
    fn formats_are_detected() {
        let mut json = b"  {\"key\":\"a\"}".as_slice();
        assert_eq!(detect_format("-", &mut json).unwrap(), Format::Jsonl);
        let mut csv = b"key,value\n".as_slice();
        assert_eq!(detect_format("data", &mut csv).unwrap(), Format::Csv);
        assert_eq!(detect_format("x.CSV", &mut json).unwrap(), Format::Csv);
        assert_eq!(detect_format("x.jsonl", &mut csv).unwrap(), Format::Jsonl);
    }
}
