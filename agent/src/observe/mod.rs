//! What the agent sees of the machine and of each job: clocks, machine facts, environment.
pub mod arm_cpu;
pub mod calibrate;
pub mod capabilities;
pub mod cgroupfs;
pub mod clock;
pub mod env;
pub mod facts;
pub mod machine;
pub mod perf;
pub mod trace;
pub mod tracedat;
pub mod tracefs;
