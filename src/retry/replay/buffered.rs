//! [`Buffered`]: a request body that records what it sends, so a retry can
//! send it again.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

/// A streaming request body shared by the attempts of one request.
///
/// The first attempt reads the original body and records each chunk (and
/// the trailers) while the record stays within its limit; a copy replays
/// the record, then reads on from the original where the last reader left
/// it. Only one attempt reads the original at a time: a copy made while
/// another attempt is still sending the body waits for it to finish or be
/// dropped. Past the limit nothing more is recorded and no copy can be
/// made (the request is sent once).
///
/// Made by the [`RequestBody`](super::RequestBody) impls of streaming body
/// types; a body type of yours can use [`Buffered::keep`] and
/// [`Buffered::copy`] the same way.
pub struct Buffered<B> {
    shared: Arc<Mutex<State<B>>>,
    /// Chunks of the record this copy has sent.
    pos: usize,
    /// The original body, while this copy is the one reading it.
    body: Option<B>,
    trailers_sent: bool,
}

/// What copies of a [`Buffered`] body are made from.
pub struct KeptBody<B> {
    shared: Arc<Mutex<State<B>>>,
}

struct State<B> {
    /// The original body, when no copy is reading it.
    body: Option<B>,
    chunks: Vec<Bytes>,
    len: usize,
    limit: usize,
    /// Past the limit (or the original failed): no more copies.
    spoiled: bool,
    /// The original ended; the record is complete.
    ended: bool,
    trailers: Option<HeaderMap>,
    /// Copies waiting for the reader to finish.
    waiters: Vec<Waker>,
}

impl<B> std::fmt::Debug for Buffered<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffered")
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

fn lock<B>(shared: &Mutex<State<B>>) -> MutexGuard<'_, State<B>> {
    // A panic while holding the lock leaves plain data behind; go on.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl<B> Buffered<B> {
    /// Splits `body` into the first attempt's (recording up to `limit`
    /// bytes) and what copies are made from.
    pub fn keep(body: B, limit: usize) -> (Self, KeptBody<B>) {
        let shared = Arc::new(Mutex::new(State {
            body: None,
            chunks: Vec::new(),
            len: 0,
            limit,
            spoiled: false,
            ended: false,
            trailers: None,
            waiters: Vec::new(),
        }));
        let first = Buffered {
            shared: Arc::clone(&shared),
            pos: 0,
            body: Some(body),
            trailers_sent: false,
        };
        (first, KeptBody { shared })
    }

    /// A copy that replays the record, or `None` when the body outgrew its
    /// limit or another attempt is still sending it (a hedge must not wait
    /// on the attempt it hedges).
    pub fn copy(kept: &KeptBody<B>) -> Option<Self> {
        let st = lock(&kept.shared);
        if st.spoiled || (!st.ended && st.body.is_none()) {
            return None;
        }
        drop(st);
        Some(Buffered {
            shared: Arc::clone(&kept.shared),
            pos: 0,
            body: None,
            trailers_sent: false,
        })
    }
}

impl<B> Drop for Buffered<B> {
    fn drop(&mut self) {
        if let Some(body) = self.body.take() {
            let mut st = lock(&self.shared);
            st.body = Some(body);
            for w in st.waiters.drain(..) {
                w.wake();
            }
        }
    }
}

impl<B> Body for Buffered<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        if this.body.is_none() {
            let mut st = lock(&this.shared);
            if let Some(chunk) = st.chunks.get(this.pos) {
                this.pos += 1;
                return Poll::Ready(Some(Ok(Frame::data(chunk.clone()))));
            }
            if st.ended {
                if !this.trailers_sent {
                    this.trailers_sent = true;
                    if let Some(t) = st.trailers.clone() {
                        return Poll::Ready(Some(Ok(Frame::trailers(t))));
                    }
                }
                return Poll::Ready(None);
            }
            match st.body.take() {
                Some(body) => this.body = Some(body),
                None => {
                    st.waiters.push(cx.waker().clone());
                    return Poll::Pending;
                }
            }
        }
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = std::task::ready!(Pin::new(body).poll_frame(cx));
        let mut st = lock(&this.shared);
        match &frame {
            Some(Ok(f)) => {
                if let Some(data) = f.data_ref() {
                    if !st.spoiled && st.len + data.len() <= st.limit {
                        st.len += data.len();
                        st.chunks.push(data.clone());
                        this.pos = st.chunks.len();
                    } else {
                        st.spoiled = true;
                        st.chunks = Vec::new();
                    }
                } else if let Some(t) = f.trailers_ref() {
                    st.trailers = Some(t.clone());
                    st.ended = true;
                    this.trailers_sent = true;
                }
            }
            None => st.ended = true,
            Some(Err(_)) => st.spoiled = true,
        }
        if st.ended {
            // The record is complete: the original is done with.
            this.body = None;
            for w in st.waiters.drain(..) {
                w.wake();
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        match &self.body {
            Some(body) => body.is_end_stream(),
            None => {
                let st = lock(&self.shared);
                st.ended
                    && self.pos >= st.chunks.len()
                    && (self.trailers_sent || st.trailers.is_none())
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.body {
            // The first read: the original's hint (a copy's record is
            // within it).
            Some(body) if self.pos == 0 => body.size_hint(),
            _ => {
                let st = lock(&self.shared);
                if st.ended {
                    let sent: usize = st.chunks.iter().take(self.pos).map(Bytes::len).sum();
                    SizeHint::with_exact((st.len - sent) as u64)
                } else {
                    SizeHint::default()
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full, StreamBody};

    fn stream(chunks: &[&'static str]) -> impl Body<Data = Bytes, Error = std::io::Error> + Unpin {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::from_static(c.as_bytes()))))
            .collect();
        StreamBody::new(futures_util_lite::iter(frames))
    }

    mod futures_util_lite {
        use std::pin::Pin;
        use std::task::{Context, Poll};

        pub struct Iter<I>(I);
        pub fn iter<I: IntoIterator>(i: I) -> Iter<I::IntoIter> {
            Iter(i.into_iter())
        }
        impl<I: Iterator + Unpin> futures_core::Stream for Iter<I> {
            type Item = I::Item;
            fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<I::Item>> {
                Poll::Ready(self.get_mut().0.next())
            }
        }
    }

    async fn read<B: Body<Data = Bytes> + Unpin>(b: B) -> Vec<u8>
    where
        B::Error: std::fmt::Debug,
    {
        b.collect().await.unwrap().to_bytes().to_vec()
    }

    #[tokio::test]
    async fn copies_replay_the_record_then_read_on() {
        let (first, kept) = Buffered::keep(stream(&["ab", "cd", "ef"]), 1024);
        let mut first = first;
        // The first attempt sends one chunk, then fails and is dropped.
        let f = first.frame().await.unwrap().unwrap();
        assert_eq!(f.into_data().unwrap(), "ab");
        drop(first);
        let copy = Buffered::copy(&kept).expect("the reader was dropped");
        assert_eq!(read(copy).await, b"abcdef");
        // The record is complete: copies are independent now.
        let a = Buffered::copy(&kept).unwrap();
        let b = Buffered::copy(&kept).unwrap();
        assert_eq!(a.size_hint().exact(), Some(6));
        assert_eq!(read(a).await, b"abcdef");
        assert_eq!(read(b).await, b"abcdef");
    }

    #[tokio::test]
    async fn past_the_limit_the_body_goes_on_but_cannot_be_copied() {
        let (first, kept) = Buffered::keep(stream(&["abc", "def"]), 4);
        assert_eq!(read(first).await, b"abcdef");
        assert!(Buffered::copy(&kept).is_none());
    }

    #[tokio::test]
    async fn no_copy_while_another_attempt_reads() {
        let (mut first, kept) = Buffered::keep(stream(&["ab", "cd"]), 1024);
        let _ = first.frame().await;
        assert!(Buffered::copy(&kept).is_none(), "a hedge must not wait");
        let _ = read(&mut first).await;
        assert!(Buffered::copy(&kept).is_some());
    }

    #[tokio::test]
    async fn empty_and_full_bodies() {
        let (first, kept) = Buffered::keep(Full::new(Bytes::from_static(b"x")), 1024);
        assert_eq!(read(first).await, b"x");
        assert_eq!(read(Buffered::copy(&kept).unwrap()).await, b"x");
    }
}
