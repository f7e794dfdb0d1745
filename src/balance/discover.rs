use std::future::poll_fn;
use std::hash::Hash;
use std::pin::pin;

use tower::discover::{Change, Discover};

use super::Handle;
use crate::pick::Picker;

/// Applies every change from a [`Discover`] stream to a balancer through its
/// [`Handle`], until the stream ends (`Ok`) or fails (its error).
///
/// The returned future does the work; spawn it on your runtime, or use
/// [`spawn_discover`].
///
/// ```
/// use std::convert::Infallible;
/// use tower::discover::{Change, ServiceList};
/// use tower::service_fn;
/// use tower_lb::{Balance, balance};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let svc = service_fn(|x: u32| async move { Ok::<_, Infallible>(x) });
/// let lb = Balance::<usize, _>::builder().build().unwrap();
/// // `ServiceList` yields `Insert(0, svc)`, `Insert(1, svc)`, then ends.
/// balance::discover(lb.handle(), ServiceList::new([svc, svc])).await.unwrap();
/// assert_eq!(lb.handle().len(), 2);
/// # }
/// ```
pub async fn discover<K, S, P, C, D>(
    handle: Handle<K, S, P, C>,
    discover: D,
) -> Result<(), D::Error>
where
    K: Hash + Eq,
    P: Picker,
    D: Discover<Key = K, Service = S>,
{
    let mut discover = pin!(discover);
    loop {
        match poll_fn(|cx| discover.as_mut().poll_discover(cx)).await {
            None => return Ok(()),
            Some(Err(e)) => return Err(e),
            Some(Ok(Change::Insert(key, svc))) => {
                handle.insert(key, svc);
            }
            Some(Ok(Change::Remove(key))) => {
                handle.remove(&key);
            }
        }
    }
}

/// Spawns [`discover`] on the current tokio runtime.
pub fn spawn_discover<K, S, P, C, D>(
    handle: Handle<K, S, P, C>,
    d: D,
) -> tokio::task::JoinHandle<Result<(), D::Error>>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
    P: Picker,
    D: Discover<Key = K, Service = S> + Send + 'static,
    D::Error: Send + 'static,
{
    tokio::spawn(discover(handle, d))
}
