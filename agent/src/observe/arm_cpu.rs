//! The CPU's name on Arm, where /proc/cpuinfo has no "model name": arm64 Linux prints only
//! the MIDR fields ("CPU implementer : 0x41", "CPU part : 0xd03"), so a Cortex-A53 board
//! showed its CPU as None. The names are Arm's for its own cores (implementer 0x41), from
//! the cores' technical reference manuals; any other pair is named by its numbers.

/// Arm Ltd cores by MIDR part number.
const ARM_PARTS: &[(u32, &str)] = &[
    (0xd03, "Cortex-A53"), (0xd04, "Cortex-A35"), (0xd05, "Cortex-A55"), (0xd07, "Cortex-A57"),
    (0xd08, "Cortex-A72"), (0xd09, "Cortex-A73"), (0xd0a, "Cortex-A75"), (0xd0b, "Cortex-A76"),
    (0xd0c, "Neoverse-N1"), (0xd0d, "Cortex-A77"), (0xd40, "Neoverse-V1"), (0xd41, "Cortex-A78"),
    (0xd44, "Cortex-X1"), (0xd46, "Cortex-A510"), (0xd47, "Cortex-A710"), (0xd48, "Cortex-X2"),
    (0xd49, "Neoverse-N2"), (0xd4f, "Neoverse-V2"),
];

fn hex_field(info: &str, key: &str) -> Option<u32> {
    let line = info.lines().find(|l| l.starts_with(key))?;
    let v = line.split_once(':')?.1.trim();
    u32::from_str_radix(v.trim_start_matches("0x"), 16).ok()
}

/// "ARM Cortex-A53" (or "CPU implementer 0x.. part 0x..") from an arm64 /proc/cpuinfo; None
/// where it has no MIDR fields (x86, or a kernel that prints "model name").
pub fn model(info: &str) -> Option<String> {
    let implementer = hex_field(info, "CPU implementer")?;
    let part = hex_field(info, "CPU part")?;
    let known = (implementer == 0x41).then(|| ARM_PARTS.iter().find(|(p, _)| *p == part)).flatten();
    Some(match known {
        Some((_, name)) => format!("ARM {name}"),
        None => format!("CPU implementer {implementer:#x} part {part:#05x}"),
    })
}

#[cfg(test)]
mod tests {
    /// What the emulated Cortex-A53 board's kernel (6.1 arm64) prints for one CPU.
    const A53: &str = "processor\t: 0\nBogoMIPS\t: 125.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid\n\
CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd03\nCPU revision\t: 4\n";

    #[test]
    fn an_arm_core_is_named_and_others_by_their_numbers() {
        assert_eq!(super::model(A53).as_deref(), Some("ARM Cortex-A53"));
        let other = A53.replace("0x41", "0x51").replace("0xd03", "0x802");
        assert_eq!(super::model(&other).as_deref(), Some("CPU implementer 0x51 part 0x802"));
        assert_eq!(super::model("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"), None);
    }
}
