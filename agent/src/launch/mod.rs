//! The plumbing a run is made of: control groups and the run's own group (children started
//! in it by clone3 where the kernel can), the journal that
//! undoes every change, IRQ steering, the signals the agent waits on, the shared control
//! block, process set-up (placement, policy, memory), record staging and JSON files written
//! atomically (through the safe file operations of safefs.rs). The run itself (its phases) is in run/;
//! victims, enemies and the regulator use these parts from their own processes.

pub mod blockdev;
pub mod cgroups;
pub mod clone_into;
pub mod contain;
pub mod irq;
pub mod journal;
pub mod jsonfile;
pub mod resctrl;
pub mod setup;
pub mod shm;
pub mod signals;
pub mod staging;
