//! xtalk-agent: executes one run plan on the target. Thin command line; see run/.
mod bounds;
mod catalog;
mod check;
mod declare;
mod enemies;
mod kernels;
mod launch;
mod observe;
mod outcome;
mod plan;
mod preflight;
mod record;
mod regulate;
mod run;
mod safefs;
mod sched;
mod victims;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::exit;

#[derive(Parser)]
#[command(name = "xtalk-agent", version, about = "xtalk on-target agent: runs a victim beside enemies and records every job")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Execute a run plan (JSON; '-' reads stdin). Exit: 0 completed, 1 failed or timed out
    /// (results written), 2 bad input (nothing started), 3 internal error, 130 interrupted.
    Run {
        plan: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// End the run (as for SIGTERM) if the process that started the agent dies.
        #[arg(long)]
        exit_with_parent: bool,
    },
    /// Validate a run plan (or a JSON array of plans) against the schema and this machine (or
    /// the machine fixture named by $XTALK_MACHINE); print "ok".
    Check { plan: PathBuf },
    /// Print the catalog: every enemy kind with its parameters (types, bounds, defaults,
    /// units), and the plan's limits (docs/agent.md).
    Catalog {
        /// As JSON (the only form).
        #[arg(long)]
        json: bool,
    },
    /// Print a job log (jobs.bin) as CSV.
    Dump { jobs: PathBuf },
    /// Print this machine's environment and facts as JSON (a machine fixture: save it and set
    /// XTALK_MACHINE=FILE to check plans as that machine would; with it set, print the fixture).
    Sysinfo,
    /// Undo what dead runs left on this machine (cgroups and the processes left in them, IRQ
    /// affinity, staging directories, trace instances) from their journals in /run/xtalk;
    /// prints one line per change restored ("agent <pid>: ...").
    Recover,
    /// Write the AOCS scenario's input and expected-output files (aocs-input.bin,
    /// aocs-expected.bin) into DIR by running the closed loop once; prints a JSON summary.
    AocsGenerate {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = victims::aocs::scenario::STEPS)]
        steps: u64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// One AOCS instance on its own (the `aocs` enemy with a duplicated executable runs
    /// this from a private copy of the agent); one output line per step, until SIGTERM.
    #[command(hide = true)]
    AocsInstance {
        #[arg(long)]
        input: String,
        #[arg(long)]
        expected: String,
        #[arg(long)]
        first_step: u64,
        #[arg(long)]
        steps: u64,
        #[arg(long)]
        period_ns: u64,
    },
    /// Measure the cost of every time source and counter read (back-to-back pairs) and
    /// characterise the clocks; prints JSON.
    Calibrate {
        #[arg(long, default_value_t = 180_000)]
        pairs: usize,
        /// CPU to measure on (default: the last online CPU).
        #[arg(long)]
        cpu: Option<usize>,
        /// Window for clock drift, ms.
        #[arg(long, default_value_t = 1000)]
        drift_ms: u64,
    },
}

fn die(code: i32, msg: String) -> ! {
    eprintln!("xtalk-agent: {msg}");
    exit(code)
}

fn read_plan_text(path: &PathBuf) -> String {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map(|_| s)
    } else {
        std::fs::read_to_string(path)
    }
    .unwrap_or_else(|e| die(run::EXIT_BAD_INPUT, format!("plan: cannot read {}: {e}", path.display())))
}

fn checked(text: &str) -> plan::Plan {
    checked_at(text, None)
}

/// `checked`; with `index` (the plan's place in a `check` array) a refusal is also one JSON
/// line on stdout, `{"plan", "field", "message", "machine"}`, so that the host knows which
/// plan was refused and whether for its input or for what this machine cannot provide.
fn checked_at(text: &str, index: Option<usize>) -> plan::Plan {
    fn refuse(e: plan::PlanError, index: Option<usize>) -> ! {
        if let Some(i) = index {
            println!("{}", serde_json::json!({"plan": i, "field": e.field, "message": e.message, "machine": e.machine}));
        }
        die(run::EXIT_BAD_INPUT, format!("plan: {e}"))
    }
    let p = plan::parse(text).unwrap_or_else(|e| refuse(e, index));
    if let Err(e) = check::check(&p) {
        refuse(e, index);
    }
    p
}

/// Commands that change or measure this machine cannot use a recorded one: exit 2.
fn refuse_fixture(command: &str) {
    if let Some(f) = &observe::facts::current().fixture {
        die(run::EXIT_BAD_INPUT, format!("{command}: {}={} is a machine fixture, for planning and checking only; unset it to {command} on this machine",
            observe::facts::ENV_VAR, f.path.display()));
    }
}

fn load_plan(path: &PathBuf) -> plan::Plan {
    checked(&read_plan_text(path))
}

/// `check` of one plan, or of a JSON array of plans (one process for the many plans of a
/// campaign); the first refusal ends it (its place in the array on stdout: `checked_at`).
fn check_all(path: &PathBuf) {
    let text = read_plan_text(path);
    if text.trim_start().starts_with('[') {
        let plans: Vec<serde_json::Value> =
            serde_json::from_str(&text).unwrap_or_else(|e| die(run::EXIT_BAD_INPUT, format!("plan: not a JSON array of plans: {e}")));
        for (i, p) in plans.iter().enumerate() {
            checked_at(&p.to_string(), Some(i));
        }
    } else {
        checked_at(&text, Some(0));
    }
}

fn main() {
    let cli = Cli::parse();
    // A bad fixture is refused before any command; the live facts are read when first asked.
    if std::env::var_os(observe::facts::ENV_VAR).is_some() {
        if let Err(e) = observe::facts::init() {
            die(run::EXIT_BAD_INPUT, e);
        }
    }
    match cli.cmd {
        Cmd::Run { plan, out, exit_with_parent } => {
            // Before anything is read or made: a termination signal from here on ends the
            // run through run::execute (or stays pending until a refusal exits), never by
            // its default action half-way through (run::execute blocks them again, harmlessly).
            launch::signals::block_watched();
            refuse_fixture("run");
            let p = load_plan(&plan);
            if out.join("run.json").exists() {
                die(run::EXIT_BAD_INPUT, format!("--out: {} already holds a run; choose an empty directory", out.display()));
            }
            if let Err(e) = safefs::create_dirs(&out) {
                die(run::EXIT_BAD_INPUT, format!("--out: cannot create {}: {e}", out.display()));
            }
            // Absolute: the journal names files in it, and recovery may run from anywhere.
            let out = out.canonicalize().unwrap_or(out);
            if let Err(e) = bounds::check_output(&p, &out) {
                die(run::EXIT_BAD_INPUT, e.to_string());
            }
            match run::execute(&p, &out, exit_with_parent) {
                Ok(code) => exit(code),
                Err(e) => die(run::EXIT_INTERNAL, e),
            }
        }
        Cmd::Check { plan } => {
            check_all(&plan);
            println!("ok");
        }
        Cmd::Dump { jobs } => {
            let (_, _, recs) = record::jobs::read_file(&jobs).unwrap_or_else(|e| die(run::EXIT_BAD_INPUT, format!("{}: {e}", jobs.display())));
            use std::io::Write;
            let mut w = std::io::BufWriter::new(std::io::stdout().lock());
            let out = || -> std::io::Result<()> {
                writeln!(w, "job,release_ns,wakeup_ns,start_ns,end_ns,cpu_time_ns,nvcsw,nivcsw,cpu_start,cpu_end,flags")?;
                for r in recs {
                    writeln!(w, "{},{},{},{},{},{},{},{},{},{},{}", r.job, r.release_ns, r.wakeup_ns, r.start_ns, r.end_ns, r.cpu_time_ns, r.nvcsw, r.nivcsw, r.cpu_start, r.cpu_end, r.flags)?;
                }
                w.flush()
            };
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = out();
        }
        Cmd::Calibrate { pairs, cpu, drift_ms } => {
            refuse_fixture("calibrate");
            let online = observe::machine::online_cpus();
            let cpu = cpu.unwrap_or(*online.last().unwrap_or(&0));
            if !online.contains(&cpu) {
                die(run::EXIT_BAD_INPUT, format!("--cpu: CPU {cpu} does not exist or is offline; online: {}", observe::machine::cpu_list(&online)));
            }
            if pairs < 100 {
                die(run::EXIT_BAD_INPUT, "--pairs: at least 100".into());
            }
            println!("{}", serde_json::to_string(&observe::calibrate::run(pairs, cpu, drift_ms as i64 * 1_000_000, &online)).unwrap());
        }
        Cmd::AocsInstance { input, expected, first_step, steps, period_ns } => {
            exit(enemies::aocs_instance(&input, &expected, first_step, steps, period_ns))
        }
        Cmd::Recover => {
            for line in run::recover() {
                println!("{line}");
            }
        }
        Cmd::AocsGenerate { out, steps, seed } => {
            if steps == 0 || steps > 10_000_000 {
                die(run::EXIT_BAD_INPUT, "--steps: between 1 and 10000000".into());
            }
            match victims::aocs::generate::generate(&out, steps, seed) {
                Ok(summary) => println!("{}", serde_json::to_string_pretty(&summary).unwrap()),
                Err(e) => die(run::EXIT_BAD_INPUT, format!("--out: {e}")),
            }
        }
        Cmd::Catalog { json: _ } => println!("{}", serde_json::to_string_pretty(&catalog::catalog()).unwrap()),
        Cmd::Sysinfo => println!("{}", serde_json::to_string_pretty(&observe::facts::sysinfo(observe::facts::current())).unwrap()),
    }
}
