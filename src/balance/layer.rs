//! [`BalanceLayer`]: a balancer as a tower `Layer` over a base service.

use std::hash::Hash;

use tower_layer::Layer;

use super::{Balance, Builder};
use crate::error::ConfigError;
use crate::model::EndpointMeta;
use crate::pick::Picker;

/// The endpoint type of a [`Builder`] that makes a [`BalanceLayer`]: its
/// endpoints come from keys and a maker, not from services given one by one
/// (so it has no values; [`Builder::endpoint`] cannot be called on it).
#[derive(Debug, Clone, Copy)]
pub enum FromKeys {}

impl<K> Balance<K, FromKeys> {
    /// A builder for a [`BalanceLayer`]: configure it like any balancer,
    /// then turn it into a layer with [`Builder::layer`].
    pub fn layer_builder() -> Builder<K, FromKeys> {
        Builder::new()
    }
}

/// Wraps a base service (a hyper-util or reqwest client, a tonic channel,
/// any `S`) in a [`Balance`]: each endpoint is `make(&key, &inner)` (a
/// [`MakeEndpoint`], such as a closure), the
/// base service pointed at one key. This is the tower idiom for the
/// balancer; [`Builder::build`] makes the same [`Balance`] from services
/// given one by one.
///
/// Each [`layer`](Layer::layer) call makes an independent balancer (its own
/// endpoint state); clone the returned `Balance` to share one.
///
/// ```
/// use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};
/// use tower_lb::{Balance, pick};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A base "client" that says which address it was pointed at.
/// #[derive(Clone)]
/// struct Client;
/// let layer = Balance::layer_builder()
///     .picker(pick::RoundRobin::new())
///     .layer(["10.0.0.1", "10.0.0.2"], |addr: &&'static str, _base: &Client| {
///         let addr = *addr;
///         service_fn(move |path: &'static str| async move {
///             Ok::<_, std::io::Error>(format!("{addr}{path}"))
///         })
///     })?;
/// let mut svc = ServiceBuilder::new().layer(layer).service(Client);
/// assert_eq!(svc.ready().await?.call("/a").await?, "10.0.0.1/a");
/// assert_eq!(svc.ready().await?.call("/b").await?, "10.0.0.2/b");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct BalanceLayer<K, M, P, C> {
    keys: Vec<(K, f64, EndpointMeta)>,
    make: M,
    template: Builder<K, FromKeys, P, C>,
}

impl<K, P, C> Builder<K, FromKeys, P, C> {
    /// Turns the configuration into a layer whose endpoints are `keys`
    /// (weight 1 each), each served by `make(&key, &base)`.
    ///
    /// # Errors
    /// The same [`ConfigError`]s as [`build`](Builder::build), checked now,
    /// so making a balancer from the layer cannot fail.
    pub fn layer<M>(
        self,
        keys: impl IntoIterator<Item = K>,
        make: M,
    ) -> Result<BalanceLayer<K, M, P, C>, ConfigError>
    where
        K: Hash + Eq,
        P: Picker,
    {
        let keys = keys
            .into_iter()
            .map(|k| (k, 1.0, EndpointMeta::default()))
            .collect();
        self.weighted_layer(keys, make)
    }

    /// Like [`layer`](Self::layer), with each key's weight and metadata.
    ///
    /// # Errors
    /// As [`layer`](Self::layer).
    pub fn weighted_layer<M>(
        self,
        keys: Vec<(K, f64, EndpointMeta)>,
        make: M,
    ) -> Result<BalanceLayer<K, M, P, C>, ConfigError>
    where
        K: Hash + Eq,
        P: Picker,
    {
        self.validate(keys.iter().map(|(k, w, _)| (k, *w)))?;
        Ok(BalanceLayer {
            keys,
            make,
            template: self,
        })
    }
}

impl<K, M, P, C> std::fmt::Debug for BalanceLayer<K, M, P, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalanceLayer")
            .field("endpoints", &self.keys.len())
            .finish_non_exhaustive()
    }
}

/// Makes the service of the endpoint keyed `key` from a layer's base
/// service. Implemented for closures `Fn(&K, &S) -> T`.
pub trait MakeEndpoint<K, S> {
    /// The endpoint's service.
    type Service;

    /// The base service pointed at `key`.
    fn make(&self, key: &K, base: &S) -> Self::Service;
}

impl<K, S, T, F: Fn(&K, &S) -> T> MakeEndpoint<K, S> for F {
    type Service = T;

    fn make(&self, key: &K, base: &S) -> T {
        self(key, base)
    }
}

impl<K, M, P, C, S> Layer<S> for BalanceLayer<K, M, P, C>
where
    K: Clone + Hash + Eq,
    M: MakeEndpoint<K, S>,
    P: Picker + Clone,
    C: Clone,
{
    type Service = Balance<K, M::Service, P, C>;

    fn layer(&self, inner: S) -> Self::Service {
        let mut b = self.template.with_endpoint_type::<M::Service>();
        for (key, weight, meta) in &self.keys {
            b = b.endpoint_with(
                key.clone(),
                self.make.make(key, &inner),
                *weight,
                meta.clone(),
            );
        }
        // Checked when the layer was made.
        b.assemble()
    }
}
