//! The lab's one error type: bad input (exit status 2) or a failure while
//! running (exit status 1).

use std::fmt;

/// What went wrong, as a message for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabError {
    /// True for bad input (scenario file, flags): exit status 2.
    pub input: bool,
    /// The message: file, field and problem.
    pub message: String,
}

impl LabError {
    /// Bad input: a scenario or a flag.
    pub fn input(message: impl Into<String>) -> Self {
        Self {
            input: true,
            message: message.into(),
        }
    }

    /// A failure while running (a socket, a file write).
    pub fn runtime(message: impl Into<String>) -> Self {
        Self {
            input: false,
            message: message.into(),
        }
    }

    /// The process exit status for this error.
    pub fn exit_code(&self) -> u8 {
        if self.input { 2 } else { 1 }
    }
}

impl fmt::Display for LabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)
    }
}

impl std::error::Error for LabError {}
