//! Every picker of the crate by name: [`AnyPicker`], for configuration
//! files, command lines, the lab, the benches and the tests, which iterate
//! [`NAMES`] instead of keeping their own lists.

use std::sync::Arc;

use super::hash::{HashTable, MaglevTable, Ring};
use super::key::RequestKey;
use super::prequal::{PrequalTable, ProbePool};
use super::weighted_round_robin::Schedule;
use super::{
    KeyHash, LeastInFlight, LeastResponseTime, Maglev, OrcaRoundRobin, P2cLeastInFlight, PeakEwma,
    Pick, Picker, Pool, Prequal, Random, RingHash, RoundRobin, WeightTable, WeightedRoundRobin,
};
use crate::error::ConfigError;
use crate::model::EndpointState;

/// Declares the registry: one line per picker, `"name" => Variant(Type,
/// Table) = |key| constructor`. Adding a picker is its file and one line
/// here.
macro_rules! registry {
    ($($name:literal => $variant:ident($ty:ty, $table:ty) = |$key:ident| $make:expr;)*) => {
        /// One of the crate's pickers, chosen at run time by
        /// [`name`](AnyPicker::by_name). `E` is the request key the hash
        /// pickers read (for the others it is unused).
        ///
        /// A pick costs one `match` more than the picker itself.
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum AnyPicker<E> {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant($ty),
            )*
        }

        /// The per-snapshot table of an [`AnyPicker`].
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum AnyTable {
            $(
                #[doc = concat!("`", $name, "`'s table")]
                $variant($table),
            )*
        }

        /// The names of every picker [`AnyPicker::by_name`] knows, in the
        /// order of the crate's comparison table. Each equals the picker's
        /// [`Picker::name`].
        pub const NAMES: &[&str] = &[$($name),*];

        impl<E> AnyPicker<E> {
            /// The picker called `name` with its defaults; hash pickers
            /// read `key`.
            ///
            /// # Errors
            /// A [`ConfigError`] on `picker` when no picker has that name
            /// (the message lists them).
            pub fn by_name(name: &str, key: E) -> Result<Self, ConfigError> {
                match name {
                    $($name => {
                        let $key = key;
                        Ok(AnyPicker::$variant($make))
                    })*
                    _ => Err(ConfigError::new(
                        "picker",
                        name,
                        concat!("one of: ", $($name, " "),*),
                    )),
                }
            }
        }

        impl<E: Send + Sync + 'static> Picker for AnyPicker<E> {
            type Table = AnyTable;

            fn name(&self) -> &'static str {
                match self {
                    $(AnyPicker::$variant(p) => p.name(),)*
                }
            }

            fn table(&self, endpoints: &[Arc<EndpointState>]) -> AnyTable {
                match self {
                    $(AnyPicker::$variant(p) => AnyTable::$variant(p.table(endpoints)),)*
                }
            }

            fn validate(&self) -> Result<(), ConfigError> {
                match self {
                    $(AnyPicker::$variant(p) => p.validate(),)*
                }
            }

            fn probe_pool(&self) -> Option<&Arc<ProbePool>> {
                match self {
                    $(AnyPicker::$variant(p) => p.probe_pool(),)*
                }
            }
        }

        impl<Req, E: RequestKey<Req>> Pick<Req> for AnyPicker<E> {
            #[inline]
            fn pick(&self, req: &Req, pool: &Pool<'_, AnyTable>) -> Option<usize> {
                match (self, pool.table()) {
                    $((AnyPicker::$variant(p), AnyTable::$variant(t)) => {
                        p.pick(req, &pool.with_table(t))
                    })*
                    // A table of another picker: cannot happen, the
                    // balancer builds tables with its own picker.
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            #[inline]
            fn affinity(&self, req: &Req) -> Option<u64> {
                match self {
                    $(AnyPicker::$variant(p) => Pick::<Req>::affinity(p, req),)*
                }
            }
        }
    };
}

registry! {
    "round_robin" => RoundRobin(RoundRobin, ()) = |_key| RoundRobin::new();
    "weighted_round_robin" => WeightedRoundRobin(WeightedRoundRobin, Schedule) = |_key| WeightedRoundRobin::new();
    "random" => Random(Random, ()) = |_key| Random::new();
    "least_in_flight" => LeastInFlight(LeastInFlight, ()) = |_key| LeastInFlight::new();
    "p2c_least_in_flight" => P2cLeastInFlight(P2cLeastInFlight, ()) = |_key| P2cLeastInFlight::new();
    "least_response_time" => LeastResponseTime(LeastResponseTime, ()) = |_key| LeastResponseTime::new();
    "p2c_peak_ewma" => P2cPeakEwma(PeakEwma, ()) = |_key| PeakEwma::classic();
    "peak_ewma" => PeakEwma(PeakEwma, ()) = |_key| PeakEwma::default();
    "peak_ewma_orca" => PeakEwmaOrca(PeakEwma, ()) = |_key| PeakEwma::default().utilization(true);
    "orca_round_robin" => OrcaRoundRobin(OrcaRoundRobin, WeightTable) = |_key| OrcaRoundRobin::new();
    "prequal" => Prequal(Prequal, PrequalTable<()>) = |_key| Prequal::new();
    "key_hash" => KeyHash(KeyHash<E>, HashTable<(), ()>) = |key| KeyHash::new(key);
    "ring_hash" => RingHash(RingHash<E>, HashTable<Ring, ()>) = |key| RingHash::new(key);
    "maglev" => Maglev(Maglev<E>, HashTable<MaglevTable, ()>) = |key| Maglev::new(key);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::key::key_fn;
    use crate::pick::testing::Fixture;

    #[test]
    fn every_name_builds_the_picker_of_that_name_and_picks() {
        let f = Fixture::new(&[1.0, 2.0, 3.0]);
        for &name in NAMES {
            let p = AnyPicker::by_name(name, key_fn(|k: &u64| Some(*k))).unwrap();
            assert_eq!(p.name(), name);
            p.validate().unwrap();
            let table = p.table(&f.states);
            for k in 0..50u64 {
                assert!(p.pick(&k, &f.cx(&table)).is_some_and(|i| i < 3), "{name}");
            }
        }
        let e = AnyPicker::by_name("fastest", ()).unwrap_err();
        assert_eq!(e.field(), "picker");
        assert!(e.to_string().contains("peak_ewma"), "{e}");
    }
}
