//! `aocs` body: an open attitude and orbit control loop (an open substitute for the
//! proprietary AOCS of seeds 000 and 002): rigid-body dynamics with reaction wheels, gyro /
//! star-tracker / sun-sensor models with seeded noise, a complementary-filter estimator,
//! quaternion-feedback control with momentum management, and a flyby scenario. Split by
//! concern; `generate` writes the data files, `body` is the periodic victim with its two
//! I/O children.

pub mod body;
mod control;
mod dynamics;
mod estimator;
mod fsw;
pub mod generate;
pub mod io;
mod quat;
pub mod scenario;
mod sensors;
