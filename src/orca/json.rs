//! The JSON form: one object with the proto3 JSON names (`cpuUtilization`)
//! or the proto field names (`cpu_utilization`), after the `JSON ` prefix.
//!
//! A small scanner rather than a JSON crate: the report is one flat object
//! of numbers and a map of numbers, the default build stays free of a JSON
//! dependency, and scanning allocates nothing. Numbers may be written as
//! JSON numbers or, as proto3 JSON allows, strings (`"0.5"`; `"NaN"` and
//! `"Infinity"` are rejected like any non-finite value). A key with an
//! escape sequence is left out and counted; values of unknown keys are
//! skipped (and counted), nesting at most [`MAX_DEPTH`] deep.

use super::report::Field;
use super::{LoadReport, ParseError};

/// Deepest nesting skipped inside an unknown value.
const MAX_DEPTH: usize = 32;

/// Fields of `OrcaLoadReport` this crate does not use: skipped, not counted.
const UNUSED: &[&str] = &["rps", "requestCost", "request_cost", "utilization"];

pub(super) fn parse(text: &str) -> Result<LoadReport, ParseError> {
    let mut s = Scanner {
        b: text.as_bytes(),
        i: 0,
    };
    let mut report = LoadReport::new();
    s.object(|s, key, escaped| {
        if escaped {
            report.reject();
            return s.skip_value();
        }
        if let Some(field) = Field::named(key) {
            match s.number()? {
                Some(v) => report.set(field, v),
                None => report.reject(),
            }
        } else if key == "namedMetrics" || key == "named_metrics" {
            if s.peek() == Some(b'{') {
                s.object(|s, name, escaped| {
                    match s.number()? {
                        Some(v) if !escaped => report.set_named(name, v),
                        _ => report.reject(),
                    }
                    Ok(())
                })?;
            } else {
                report.reject();
                s.skip_value()?;
            }
        } else {
            if !UNUSED.contains(&key) {
                report.reject();
            }
            s.skip_value()?;
        }
        Ok(())
    })?;
    s.ws();
    if s.i == s.b.len() {
        Ok(report)
    } else {
        Err(ParseError::Json)
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

type Step = Result<(), ParseError>;

impl<'a> Scanner<'a> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Step {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(ParseError::Json)
        }
    }

    /// `{ "key": value, ... }`, calling `member` with each key (and whether
    /// it had escapes) positioned at its value.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str, bool) -> Step) -> Step {
        self.eat(b'{')?;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            let (key, escaped) = self.string()?;
            self.eat(b':')?;
            member(self, key, escaped)?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(ParseError::Json),
            }
        }
    }

    /// A string's raw text (escapes not decoded) and whether it had any.
    fn string(&mut self) -> Result<(&'a str, bool), ParseError> {
        self.eat(b'"')?;
        let start = self.i;
        let mut escaped = false;
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'"' => {
                    let raw = &self.b[start..self.i];
                    self.i += 1;
                    // Cut at ASCII quotes of a `&str`: still UTF-8.
                    let text = std::str::from_utf8(raw).map_err(|_| ParseError::Json)?;
                    return Ok((text, escaped));
                }
                b'\\' => {
                    escaped = true;
                    self.i += 2;
                }
                _ => self.i += 1,
            }
        }
        Err(ParseError::Json)
    }

    /// A number, or a string holding one: `Some` if it parses, `None` for
    /// another kind of value (skipped).
    fn number(&mut self) -> Result<Option<f64>, ParseError> {
        if self.peek() == Some(b'"') {
            let (text, _) = self.string()?;
            return Ok(text.trim_ascii().parse().ok());
        }
        let start = self.i;
        while self
            .b
            .get(self.i)
            .is_some_and(|c| matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
        {
            self.i += 1;
        }
        if self.i == start {
            self.skip_value()?;
            return Ok(None);
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).map_err(|_| ParseError::Json)?;
        Ok(text.parse().ok())
    }

    /// Skips one value of any kind.
    fn skip_value(&mut self) -> Step {
        match self.peek() {
            Some(b'"') => self.string().map(|_| ()),
            Some(b'{' | b'[') => self.skip_nested(),
            Some(_) => {
                let start = self.i;
                while self
                    .b
                    .get(self.i)
                    .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
                {
                    self.i += 1;
                }
                if self.i == start {
                    Err(ParseError::Json)
                } else {
                    Ok(())
                }
            }
            None => Err(ParseError::Json),
        }
    }

    /// Skips a balanced `{...}` or `[...]`, strings included.
    fn skip_nested(&mut self) -> Step {
        let mut depth = 0usize;
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' | b'[' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(ParseError::Json);
                    }
                }
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.i += 1;
                        return Ok(());
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
        Err(ParseError::Json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto3_json_names_and_field_names() {
        let r = parse(
            r#"{"cpuUtilization": 0.3, "mem_utilization": "0.8", "rpsFractional": 120,
                "eps": 2e0, "applicationUtilization": 0.4, "namedMetrics": {"foo": 1, "bar": "-2.5"}}"#,
        )
        .unwrap();
        assert_eq!(r.cpu_utilization(), Some(0.3));
        assert_eq!(r.mem_utilization(), Some(0.8));
        assert_eq!(r.rps_fractional(), Some(120.0));
        assert_eq!(r.eps(), Some(2.0));
        assert_eq!(r.application_utilization(), Some(0.4));
        assert_eq!(r.named_metric("foo"), Some(1.0));
        assert_eq!(r.named_metric("bar"), Some(-2.5));
        assert_eq!(r.rejected(), 0);
    }

    #[test]
    fn unknown_and_bad_values_are_skipped_and_counted() {
        let r = parse(
            r#"{"cpuUtilization": "NaN", "rps": 3, "utilization": {"a": [1, {"b": "}"}]},
                "x\"y": 1, "gpu": [true, null], "eps": -1, "namedMetrics": 5, "memUtilization": 0.5}"#,
        )
        .unwrap();
        assert_eq!(r.cpu_utilization(), None);
        assert_eq!(r.mem_utilization(), Some(0.5));
        // NaN, the escaped key, gpu, eps < 0, namedMetrics not an object.
        assert_eq!(r.rejected(), 5);
        assert_eq!(parse("{}").unwrap(), LoadReport::new());
    }

    #[test]
    fn broken_json_is_an_error() {
        for text in [
            "",
            "{",
            "[]",
            r#"{"cpuUtilization" 0.3}"#,
            r#"{"cpuUtilization": 0.3,}"#,
            r#"{"cpuUtilization": 0.3} trailing"#,
            r#"{"a": "unterminated}"#,
            &format!(r#"{{"a": {}}}"#, "[".repeat(40)),
        ] {
            assert_eq!(parse(text), Err(ParseError::Json), "{text}");
        }
    }
}
