//! How a request ended, as the table's error split counts it: an answer's
//! status, or the kind of failure that left it without one.
//!
//! The users see the stack's error only through its message (a tower-lb
//! balancer's, a retry layer's, a `Buffer`'s, the plain client's of a peer
//! row), so the kind is read from the message's words: the lab's own
//! endpoint errors and the library's say which they are.

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An answer with this status (an error from 400 on).
    Status(u16),
    /// No answer in time: a per-try timeout, a deadline, the balancer's
    /// timeout.
    Timeout,
    /// No connection, or one closed before the answer (a replica down).
    Connect,
    /// The answer's head came but its body failed.
    Body,
    /// Refused at once by a load shedder in front of the balancer (a
    /// rival's `LoadShed`: its bounded buffer was full).
    Shed,
    /// Any other failure without an answer (the balancer refused: no
    /// endpoint available).
    Other,
}

impl Outcome {
    /// A request that failed with this message.
    pub fn of_error(message: &str) -> Self {
        let m = message.to_ascii_lowercase();
        if m.contains("overloaded") {
            Outcome::Shed
        } else if m.contains("timeout") || m.contains("timed out") || m.contains("deadline") {
            Outcome::Timeout
        } else if m.contains("connect") || m.contains("refused") || m.contains("closed") {
            Outcome::Connect
        } else if m.contains("body") {
            Outcome::Body
        } else {
            Outcome::Other
        }
    }

    /// Whether the user got what it asked for (an answer below 400).
    pub fn ok(self) -> bool {
        matches!(self, Outcome::Status(s) if s < 400)
    }

    /// The error's key in the table and the JSON (`"503"`, `"timeout"`,
    /// `"connect"`, `"body"`, `"shed"`, `"other"`); `None` for a success.
    pub fn key(self) -> Option<String> {
        match self {
            Outcome::Status(s) if s < 400 => None,
            Outcome::Status(s) => Some(s.to_string()),
            Outcome::Timeout => Some("timeout".into()),
            Outcome::Connect => Some("connect".into()),
            Outcome::Body => Some("body".into()),
            Outcome::Shed => Some("shed".into()),
            Outcome::Other => Some("other".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Outcome;

    #[test]
    fn messages_name_their_kind() {
        let cases = [
            ("attempt 2 hit the per-try timeout", "timeout"),
            ("endpoint failed: connection closed", "connect"),
            (
                "endpoint failed: request failed: client error (Connect)",
                "connect",
            ),
            ("endpoint failed: body failed: unexpected end", "body"),
            ("no endpoints to balance over", "other"),
            ("service overloaded", "shed"),
        ];
        for (m, k) in cases {
            assert_eq!(Outcome::of_error(m).key().as_deref(), Some(k), "{m}");
        }
        assert_eq!(Outcome::Status(409).key().as_deref(), Some("409"));
        assert!(Outcome::Status(200).ok() && Outcome::Status(200).key().is_none());
    }
}
