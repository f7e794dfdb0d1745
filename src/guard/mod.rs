//! The guards: what an endpoint carries, besides its health bits, that can
//! refuse a call. Today that is its circuit breaker (`breaker.rs`).
//!
//! A guard is a type implementing [`Guard`]: its configuration, how it
//! admits a call and what the call gives back when it ends (its pass),
//! whether a pick may consider the endpoint, what a finished call tells
//! it, and how its refusals are counted. The list at the end of this file
//! names every guard, one line each; from it come the endpoint's
//! [`GuardSet`] (stored in the endpoint's gate), the builder's
//! [`GuardSettings`], the call's [`Pass`], and the fan-out admission calls
//! ([`GuardSet::admit`] and the rest), so that nothing else names a guard.
//!
//! **Adding a guard** (a per-endpoint rate limit, say) touches one file
//! and one line: a file beside `breaker.rs` that implements [`Guard`] for
//! the guard's type and [`GuardConfig`] for its configuration (which makes
//! [`Builder::guard`](crate::balance::Builder::guard) accept it), and the
//! guard's line in the list. Each guard gets a health bit of its own from
//! its place in the list and sets it through its [`Watch`]; picks and the
//! census read it like any other reason. Only if the guard wants more than
//! that does it touch more: its own health event (a [`Said`] variant and
//! the health owner's arm for it), or its own reason in
//! [`Unavailable`](crate::error::Unavailable) (a field; the struct is
//! non-exhaustive). Without either, its refusals count as `other`.
//!
//! This module sits below both the endpoint model, which stores each
//! endpoint's guards without reading them, and admission, which works them:
//! neither imports the other for it.

mod breaker;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::breaker::Transition;
use crate::error::Unavailable;
use crate::outcome::Outcome;

/// One guard's rules: what [admission](crate::admission) asks of it for
/// every call on its endpoint.
pub(crate) trait Guard: Send + Sync + Sized + 'static {
    /// How the balancer's builder configures it (for every endpoint).
    type Config: GuardConfig;
    /// What a call it admitted gives back when the call ends.
    type Pass: Copy + Debug + PartialEq + Send + Sync;

    /// A new endpoint's guard, reporting through `watch`.
    fn new(config: &Self::Config, watch: Watch) -> Self;

    /// Admits one call at `now` (its pass), or refuses it.
    fn admit(&self, now: Instant) -> Result<Self::Pass, ()>;

    /// Whether a pick may consider the endpoint at `now`; asked only while
    /// the guard's health bit is set. A guard may let a pick through that
    /// its admission then refuses (the breaker's overdue probe does).
    fn permit(&self, now: Instant) -> bool;

    /// The call `pass` admitted ended with `outcome` after `latency`.
    fn record(&self, pass: Self::Pass, outcome: Outcome, latency: Duration, now: Instant);

    /// The call `pass` admitted will not be reported: give back what it
    /// holds.
    fn release(&self, pass: Self::Pass);

    /// Counts in `u` why the guard refuses a call at `now`, with the time
    /// until it admits one again; false when it does not refuse.
    fn count_refusal(&self, now: Instant, u: &mut Unavailable) -> bool;
}

/// A guard's configuration, as
/// [`Builder::guard`](crate::balance::Builder::guard) takes it: today a
/// [`CircuitBreakerConfig`](crate::breaker::CircuitBreakerConfig). Sealed:
/// the crate's guards are the ones it lists.
pub trait GuardConfig: sealed::Install + Clone + Debug + Send + Sync + 'static {}

mod sealed {
    /// Where a configuration goes in the builder's guard settings.
    pub trait Install {
        /// Puts this configuration in `settings`, replacing its guard's.
        fn install(self, settings: &mut super::GuardSettings);
    }
}

/// What a guard says to the health owner.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Said {
    /// The breaker moved (reported as a health event).
    Breaker(Transition),
}

/// Who hears an endpoint's guards: the health owner, for one endpoint.
pub(crate) trait Listen: Send + Sync + 'static {
    /// The guard whose health bit is `bit` starts (`true`) or stops
    /// refusing calls.
    fn refusing(&self, bit: u8, on: bool);
    /// The guard said something more (an event).
    fn said(&self, said: Said);
}

/// How one guard reports: its health bit, and who hears it.
#[derive(Clone)]
pub(crate) struct Watch {
    bit: u8,
    ear: Arc<dyn Listen>,
}

impl Watch {
    /// The guard starts (`true`) or stops refusing calls: sets or clears
    /// its health bit.
    pub(crate) fn refusing(&self, on: bool) {
        self.ear.refusing(self.bit, on);
    }

    /// Tells the health owner `said`.
    pub(crate) fn say(&self, said: Said) {
        self.ear.said(said);
    }
}

/// The first health bit a guard gets: the bits below are admission's own
/// reasons (ejected, failing its check).
const FIRST_BIT: u32 = 2;

/// Declares the guards, one line each (`field: Type`), and everything
/// admission and the builder need of them.
macro_rules! guards {
    ($($(#[$doc:meta])* $name:ident: $ty:ty,)+) => {
        /// Each guard's place in the list: its health bit's index.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        enum Place { $($name,)+ }

        /// The guards' health bits, all of them.
        pub(crate) const GUARD_BITS: u8 = 0 $(| GuardSet::bit(Place::$name))+;

        /// One endpoint's guards: a field per guard, `None` where the
        /// balancer does not configure it.
        #[derive(Debug, Default)]
        pub(crate) struct GuardSet {
            $($(#[$doc])* pub(crate) $name: Option<$ty>,)+
        }

        /// The guards' configurations, as the builder collects them.
        #[derive(Debug, Clone, Default)]
        pub struct GuardSettings {
            $(pub(crate) $name: Option<<$ty as Guard>::Config>,)+
        }

        /// What a call the guards admitted gives back when it ends: each
        /// guard's pass (`None` for a guard the endpoint does not have).
        #[derive(Debug, Clone, Copy, Default, PartialEq)]
        pub(crate) struct Pass {
            $($name: Option<<$ty as Guard>::Pass>,)+
        }

        impl GuardSettings {
            /// Whether any guard is on (then endpoints can be unhealthy).
            pub(crate) fn any(&self) -> bool {
                false $(|| self.$name.is_some())+
            }

            /// A new endpoint's guards, each reporting to `ear`.
            pub(crate) fn guards(&self, ear: &Arc<dyn Listen>) -> GuardSet {
                GuardSet {
                    $($name: self.$name.as_ref().map(|c| {
                        let watch = Watch { bit: GuardSet::bit(Place::$name), ear: Arc::clone(ear) };
                        <$ty as Guard>::new(c, watch)
                    }),)+
                }
            }
        }

        impl GuardSet {
            const fn bit(place: Place) -> u8 {
                1 << (FIRST_BIT + place as u32)
            }

            /// Whether the endpoint has any guard (else admission skips
            /// them altogether).
            #[inline(always)]
            pub(crate) fn any(&self) -> bool {
                false $(|| self.$name.is_some())+
            }

            /// Asks every guard to admit one call at `now`: the call's
            /// pass, or `Err` when one refuses (what the others gave is
            /// given back).
            #[inline]
            pub(crate) fn admit(&self, now: Instant) -> Result<Pass, ()> {
                let mut pass = Pass::default();
                $(if let Some(g) = &self.$name {
                    match g.admit(now) {
                        Ok(p) => pass.$name = Some(p),
                        Err(()) => {
                            self.release(pass);
                            return Err(());
                        }
                    }
                })+
                Ok(pass)
            }

            /// Whether a pick may consider the endpoint at `now`, given
            /// its health bits `bits` (a guard is asked only while its bit
            /// is set).
            #[inline]
            pub(crate) fn permit(&self, bits: u8, now: Instant) -> bool {
                true $(&& (bits & GuardSet::bit(Place::$name) == 0
                    || self.$name.as_ref().is_none_or(|g| g.permit(now))))+
            }

            /// Reports how the call `pass` admitted ended.
            pub(crate) fn record(&self, pass: Pass, outcome: Outcome, latency: Duration, now: Instant) {
                $(if let (Some(g), Some(p)) = (&self.$name, pass.$name) {
                    g.record(p, outcome, latency, now);
                })+
            }

            /// Gives back what the call `pass` admitted holds, for a call
            /// that will not be reported.
            pub(crate) fn release(&self, pass: Pass) {
                $(if let (Some(g), Some(p)) = (&self.$name, pass.$name) {
                    g.release(p);
                })+
            }

            /// Counts in `u` why the first refusing guard refuses a call at
            /// `now`; false when none refuses.
            pub(crate) fn count_refusal(&self, now: Instant, u: &mut Unavailable) -> bool {
                false $(|| self.$name.as_ref().is_some_and(|g| g.count_refusal(now, u)))+
            }
        }

        const _: () = assert!(
            (FIRST_BIT as usize) + [$(stringify!($name)),+].len() <= 8,
            "the health word has eight bits"
        );
    };
}

// The list: every guard, one line each.
guards! {
    /// The circuit breaker (`breaker.rs`).
    breaker: crate::breaker::CircuitBreaker,
}
