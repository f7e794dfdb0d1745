//! [`Builder::assemble`]: a validated configuration made into a live
//! balancer (its health owner, endpoint model, router and first snapshot).

use std::hash::Hash;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::time::Instant;

use super::super::{Balance, Built, Entry, Member, Shared, Snapshot};
use super::{Builder, DEFAULT_NAME, Settings};
use crate::admission::CapCell;
use crate::health::{Events, Health, Settings as HealthSettings};
use crate::model::{Model, Rates};
use crate::pick::Picker;
use crate::rng::RngSource;
use crate::route::{Panic as RoutePanic, Router};

impl<K, S, P, C> Builder<K, S, P, C> {
    /// Builds the balancer from a validated configuration.
    pub(crate) fn assemble(self) -> Balance<K, S, P, C>
    where
        K: Hash,
        P: Picker,
    {
        let mut cfg = self.cfg;
        let now = Instant::now();
        let name = cfg.name.take().unwrap_or_else(|| Arc::from(DEFAULT_NAME));
        let health = Arc::new(Health::new(HealthSettings {
            guards: std::mem::take(&mut cfg.guards),
            outlier: cfg.outlier.take(),
            panic_threshold: cfg.panic_threshold,
            panic_mode: cfg.panic_mode,
            events: Events {
                balancer: Arc::clone(&name),
                hook: cfg.hook.take(),
            },
            seed: cfg.seed,
        }));
        let model = Arc::new(model(&cfg, now));
        let observer = cfg.observer.map(|make| {
            make(&Built {
                algorithm: self.picker.name(),
                health: &health,
                probes: self.picker.probe_pool(),
            })
        });
        let router = Arc::new(Router::new(
            cfg.routing,
            RoutePanic {
                threshold: cfg.panic_threshold,
                mode: cfg.panic_mode,
            },
        ));
        let shared = Arc::new(Shared {
            set: ArcSwap::from_pointee(Snapshot::new(&self.picker, &router, Vec::new(), 1, &None)),
            generation: AtomicU64::new(0),
            picker: self.picker,
            classify: self.classify,
            writer: Mutex::new(()),
            model,
            census: Arc::clone(&health.census),
            health,
            rng: RngSource::new(cfg.seed),
            cap: CapCell::new(cfg.cap, cfg.load.adaptive.is_some()),
            timeout: cfg.timeout,
            next_id: AtomicU64::new(0),
            labels: cfg.labels,
            observer,
            router,
            ramps: Mutex::default(),
            membership: Arc::default(),
        });
        let members = cfg
            .endpoints
            .into_iter()
            .map(|(key, service, w, meta)| Member {
                state: shared.new_endpoint(&key, w, meta, now, false),
                entry: Arc::new(Entry { key, service }),
            })
            .collect();
        shared.publish(members);
        Balance::from_shared(shared)
    }
}

/// The endpoint model of a balancer built from `cfg`: its time constants,
/// penalties and limits.
fn model<K, S>(cfg: &Settings<K, S>, now: Instant) -> Model {
    Model {
        clock: crate::time::Clock::detect(crate::time::Epoch::new(now)),
        rates: Rates {
            latency: 1.0 / cfg.decay.as_nanos() as f64,
            failure: 1.0 / cfg.failure_decay.as_nanos() as f64,
            sample: 1.0 / cfg.sample_decay.as_nanos() as f64,
            penalty: cfg.failure_penalty.as_nanos() as f64,
        },
        default_rtt_ns: cfg.default_rtt.as_nanos() as f64,
        penalty_ns: cfg.failure_penalty.as_nanos() as f64,
        slow_start: cfg.slow_start,
        report_expiry_ns: crate::time::nanos(cfg.load.report_expiry),
        adaptive: cfg.load.adaptive,
        lane_mask: if cfg.load.per_thread && cfg.cap.is_none() && cfg.load.adaptive.is_none() {
            crate::model::mask_for_cores()
        } else {
            0
        },
    }
}
