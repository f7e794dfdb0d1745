//! A `[[resource]]` while a row runs: one semaphore every backend that
//! uses it shares (in http mode too: the backends' servers run in the
//! lab's process), so the pool saturates at the resource while the
//! replicas idle.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::scenario::{BackendSpec, ResourceSpec};

/// One shared resource.
#[derive(Debug)]
pub struct Resource {
    slots: Arc<Semaphore>,
    hold: Duration,
    wait: Option<Duration>,
    status: u16,
}

impl Resource {
    /// A fresh resource (every slot free).
    pub fn new(spec: &ResourceSpec) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(spec.slots as usize)),
            hold: spec.hold.0,
            wait: spec.wait.map(|w| w.0),
            status: spec.status,
        }
    }

    /// Takes a slot for its hold time. `Err(status)` when none freed
    /// within the wait (after waiting it out).
    pub async fn use_once(&self) -> Result<(), u16> {
        let acquire = self.slots.acquire();
        let permit = match self.wait {
            Some(w) => match tokio::time::timeout(w, acquire).await {
                Ok(p) => p,
                Err(_) => return Err(self.status),
            },
            None => acquire.await,
        };
        let Ok(_permit) = permit else {
            return Err(self.status);
        };
        tokio::time::sleep(self.hold).await;
        Ok(())
    }
}

/// Fresh resources for a row, and for each backend the ones it uses, in
/// its `uses` order.
pub fn for_backends(specs: &[ResourceSpec], backends: &[BackendSpec]) -> Vec<Vec<Arc<Resource>>> {
    let pools: Vec<(&str, Arc<Resource>)> = specs
        .iter()
        .map(|s| (s.name.as_str(), Arc::new(Resource::new(s))))
        .collect();
    backends
        .iter()
        .map(|b| {
            b.uses
                .iter()
                .filter_map(|u| pools.iter().find(|(n, _)| n == u).map(|(_, r)| r.clone()))
                .collect()
        })
        .collect()
}
