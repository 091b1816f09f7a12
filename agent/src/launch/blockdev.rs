//! The disk a path lives on, as "MAJ:MIN", for I/O limits (v2 io.max, v1 blkio throttling):
//! the kernel takes rules for whole disks only (a partition's rule is refused with ENODEV),
//! so a file system on a partition is limited through the disk holding the partition.
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Major and minor of a device number (glibc's encoding, as `major(3)`/`minor(3)`).
pub fn split_dev(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

/// The disk ("MAJ:MIN") holding the file system of `path`; None when that file system has
/// no block device (tmpfs, overlay, a btrfs subvolume's anonymous device).
pub fn disk_of(path: &Path) -> Result<Option<String>, String> {
    let md = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (major, minor) = split_dev(md.dev());
    disk_in(Path::new("/sys/dev/block"), major, minor)
}

/// `disk_of` against a sysfs tree `sys` laid out like /sys/dev/block: "MAJ:MIN" links to
/// the device's directory; a partition's directory has a `partition` file and sits in its
/// disk's directory, whose `dev` file names the disk.
pub fn disk_in(sys: &Path, major: u64, minor: u64) -> Result<Option<String>, String> {
    let link = sys.join(format!("{major}:{minor}"));
    if std::fs::symlink_metadata(&link).is_err() {
        return Ok(None);
    }
    if !link.join("partition").exists() {
        return Ok(Some(format!("{major}:{minor}")));
    }
    let real = link.canonicalize().map_err(|e| format!("{}: {e}", link.display()))?;
    let disk = real.parent().ok_or_else(|| format!("{}: a partition outside any disk", real.display()))?;
    let dev = std::fs::read_to_string(disk.join("dev")).map_err(|e| format!("{}: {e}", disk.join("dev").display()))?;
    Ok(Some(dev.trim().to_string()))
}

/// Is `s` a device number as the kernel writes it, "MAJ:MIN"?
pub fn is_dev_number(s: &str) -> bool {
    s.split_once(':').is_some_and(|(a, b)| !a.is_empty() && !b.is_empty() && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_limited_through_its_disk() {
        let t = tempfile::tempdir().unwrap();
        let disk = t.path().join("devices/vda");
        std::fs::create_dir_all(disk.join("vda1")).unwrap();
        std::fs::write(disk.join("dev"), "254:0\n").unwrap();
        std::fs::write(disk.join("vda1/dev"), "254:1\n").unwrap();
        std::fs::write(disk.join("vda1/partition"), "1\n").unwrap();
        let sys = t.path().join("dev-block");
        std::fs::create_dir(&sys).unwrap();
        std::os::unix::fs::symlink(&disk, sys.join("254:0")).unwrap();
        std::os::unix::fs::symlink(disk.join("vda1"), sys.join("254:1")).unwrap();
        assert_eq!(disk_in(&sys, 254, 1).unwrap().as_deref(), Some("254:0"));
        assert_eq!(disk_in(&sys, 254, 0).unwrap().as_deref(), Some("254:0"));
        // An anonymous device (tmpfs, overlay) has no entry: nothing to limit.
        assert_eq!(disk_in(&sys, 0, 42).unwrap(), None);
    }

    #[test]
    fn device_numbers_split_as_the_kernel_encodes_them() {
        assert_eq!(split_dev(0xfe00), (254, 0));
        assert_eq!(split_dev((259u64 << 8) | 3), (259, 3));
        // Large minors and majors use the high bits.
        assert_eq!(split_dev((0x12345u64 & 0xff) | ((0x12345u64 & !0xff) << 12) | (8 << 8)), (8, 0x12345));
        assert!(is_dev_number("8:0") && !is_dev_number("8:") && !is_dev_number("sda") && !is_dev_number("8:0 "));
    }

    #[test]
    fn a_tmpfs_path_has_no_disk() {
        // /dev/shm is tmpfs on every Linux this runs on; skip where it is not.
        let shm = Path::new("/dev/shm");
        if !shm.exists() || std::fs::metadata(shm).map(|m| split_dev(m.dev()).0 != 0).unwrap_or(true) {
            eprintln!("skipped: /dev/shm is not an anonymous-device file system here");
            return;
        }
        assert_eq!(disk_of(shm).unwrap(), None);
    }
}
