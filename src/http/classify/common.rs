//! What the HTTP and gRPC classifiers share, written once: how long a call
//! lasts ([`Track`]), whether load reports feed the endpoint's model, the
//! hook that classifies transport errors, and the three setters of these.

use crate::classify::Outcome;
use crate::http::{ClientErrors, ErrorHook, Track};

/// The settings both classifiers have, one field of each.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Common<H> {
    pub(crate) track: Track,
    pub(crate) load_reports: bool,
    pub(crate) on_error: H,
}

impl Common<ClientErrors> {
    /// Body tracking, load reports read, errors told apart by
    /// [`ClientErrors`].
    pub(crate) const fn new() -> Self {
        Self {
            track: Track::Body,
            load_reports: true,
            on_error: ClientErrors,
        }
    }
}

impl<H> Common<H> {
    /// The outcome of a transport error, through the hook.
    #[inline]
    pub(crate) fn error<E>(&self, error: &E) -> Outcome
    where
        H: ErrorHook<E>,
    {
        Outcome::Failure(self.on_error.kind(error))
    }

    /// The same settings with `on_error` as the hook.
    pub(crate) fn hook<G>(self, on_error: G) -> Common<G> {
        Common {
            track: self.track,
            load_reports: self.load_reports,
            on_error,
        }
    }
}

/// The setters of [`Common`]'s settings on a classifier `$ty<H>` that holds
/// them in its field `common`, beside its own `$field`s: written here once
/// for `http::Classifier` and `grpc::Classifier`. A macro rather than a
/// trait, so that the setters are the classifiers' own methods (no import
/// to call them) and keep their types (`on_error` changes `H`).
macro_rules! common_setters {
    ($ty:ident { $($field:ident),* }) => {
        impl<H> $ty<H> {
            /// How long a call lasts and what its latency sample is
            /// (default [`Track::Body`](crate::http::Track::Body): the
            /// in-flight slot is held until the response body ends, errs or
            /// is dropped, which for gRPC is the end of the stream; the
            /// sample is the time to the head).
            pub fn track(mut self, track: crate::http::Track) -> Self {
                self.common.track = track;
                self
            }

            /// Whether responses' [load reports](crate::orca) feed the
            /// endpoints' models (default true); turn it off for endpoints
            /// you do not trust to report.
            pub fn load_reports(mut self, on: bool) -> Self {
                self.common.load_reports = on;
                self
            }

            /// Replaces the hook that turns an `Err` into a
            /// [`FailureKind`](crate::classify::FailureKind): an
            /// [`ErrorHook`](crate::http::ErrorHook), such as a closure
            /// `Fn(&E) -> FailureKind`.
            pub fn on_error<G>(self, on_error: G) -> $ty<G> {
                $ty {
                    $($field: self.$field,)*
                    common: self.common.hook(on_error),
                }
            }
        }
    };
}
pub(crate) use common_setters;
