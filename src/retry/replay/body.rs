//! Request bodies kept for replay: clones for bodies that are values, a
//! recording [`Buffered`] body for streams.

#[cfg(feature = "http")]
use super::buffered::{self, Buffered};

/// A request body the retry layer can keep, to send again with a retry or
/// a hedge.
///
/// Implemented for bodies that are values (`()`, `String`, `Vec<u8>`,
/// `&'static str`, and with feature `http`, `Bytes`, `Full<D>`, `Empty<D>`),
/// by cloning, and for streaming bodies (`tonic::body::Body` with feature
/// `grpc`; `BoxBody<Bytes, E>`, `UnsyncBoxBody<Bytes, E>`), through
/// [`Buffered`]: the first attempt's body records what it sends, up to
/// `limit` bytes, and each copy replays the record, then goes on reading
/// where the stream stands.
#[diagnostic::on_unimplemented(
    message = "the retry layer cannot keep a request body of type `{Self}` to send it again",
    note = "implement `tower_lb::retry::RequestBody` for `{Self}` (with `tower_lb::retry::Buffered` for a stream), or give the layer a closure: `.replay(|r: &http::Request<{Self}>| None)` to never retry"
)]
pub trait RequestBody: Sized + Send + 'static {
    /// What copies are made from.
    type Kept: Send + 'static;

    /// Splits the body into the first attempt's and what copies are made
    /// from (`None`: it cannot be replayed). `limit` bounds what a stream
    /// may keep in memory.
    fn keep(self, limit: usize) -> (Self, Option<Self::Kept>);

    /// A copy for another attempt, or `None` if there can be none.
    fn copy(kept: &Self::Kept) -> Option<Self>;
}

/// Bodies that are values: each copy is a clone.
macro_rules! clone_bodies {
    ($($(#[$cfg:meta])* [$($gen:tt)*] $ty:ty;)*) => {$(
        $(#[$cfg])*
        impl<$($gen)*> RequestBody for $ty {
            type Kept = Self;

            fn keep(self, _limit: usize) -> (Self, Option<Self>) {
                (self.clone(), Some(self))
            }

            fn copy(kept: &Self) -> Option<Self> {
                Some(kept.clone())
            }
        }
    )*};
}

clone_bodies! {
    [] ();
    [] String;
    [] Vec<u8>;
    [] &'static str;
    #[cfg(feature = "http")] [] bytes::Bytes;
    #[cfg(feature = "http")] [D: Clone + Send + 'static] http_body_util::Full<D>;
    #[cfg(feature = "http")] [D: Send + 'static] http_body_util::Empty<D>;
}

/// Streaming bodies: the first attempt records, copies replay.
#[cfg(feature = "http")]
macro_rules! buffered_bodies {
    ($($(#[$cfg:meta])* [$($gen:tt)*] $ty:ty => $wrap:path;)*) => {$(
        $(#[$cfg])*
        impl<$($gen)*> RequestBody for $ty {
            type Kept = buffered::KeptBody<Self>;

            fn keep(self, limit: usize) -> (Self, Option<Self::Kept>) {
                let (first, kept) = Buffered::keep(self, limit);
                ($wrap(first), Some(kept))
            }

            fn copy(kept: &Self::Kept) -> Option<Self> {
                Buffered::copy(kept).map($wrap)
            }
        }
    )*};
}

#[cfg(feature = "http")]
buffered_bodies! {
    #[cfg(feature = "grpc")] [] tonic::body::Body => tonic::body::Body::new;
    [E: Send + 'static] http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, E>
        => http_body_util::combinators::UnsyncBoxBody::new;
    [E: Send + 'static] http_body_util::combinators::BoxBody<bytes::Bytes, E>
        => http_body_util::combinators::BoxBody::new;
}
