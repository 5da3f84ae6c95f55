#!/usr/bin/env bash
# Disk baseline for the weir-log benchmarks: sequential write speed with one
# fdatasync at the end, uncached sequential read speed, and the latency of
# small synchronous writes (one fsync each). Run it on the disk the
# benchmarks write to.
#
#   scripts/disk-speed.sh [DIR]
#
# DIR defaults to target/ of the workspace, where the benchmarks put their
# temporary logs. The figures are printed as `key=value` lines; the benchmark
# (`cargo bench -p weir-log`) runs this script itself and quotes its results
# as a ratio of these figures, unless WEIR_DISK_MB_S, WEIR_DISK_READ_MB_S and
# WEIR_FSYNC_US are already set in the environment, e.g. by
#
#   set -a; eval "$(scripts/disk-speed.sh | grep ^WEIR_)"; set +a
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/target}"
mkdir -p "$dir"
file="$(mktemp "$dir/disk-speed.XXXXXX")"
trap 'rm -f "$file"' EXIT

fs="$(df -P "$dir" | awk 'NR==2 {print $1}')"
fstype="$(df -PT "$dir" | awk 'NR==2 {print $2}')"
echo "# directory: $dir (device $fs, $fstype)"
if [ "$fstype" = tmpfs ]; then
    echo "# warning: $dir is on tmpfs; these figures are memory, not disk" >&2
fi

# dd prints e.g. "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 2.345 s, 458 MB/s"
# on stderr; take the seconds and compute the rate ourselves.
seconds_of() { sed -n 's/.* copied, \([0-9.]*\) s,.*/\1/p' | tail -1; }

# 1. Sequential write: 1 GiB in 1 MiB blocks, one fdatasync before dd exits.
seq_s="$(LC_ALL=C dd if=/dev/zero of="$file" bs=1M count=1024 conv=fdatasync 2>&1 | seconds_of)"
seq_mb_s="$(awk -v s="$seq_s" 'BEGIN { printf "%.0f", 1073741824 / s / 1e6 }')"
seq_mib_s="$(awk -v s="$seq_s" 'BEGIN { printf "%.0f", 1024 / s }')"
echo "# sequential write, 1 GiB, bs=1M, conv=fdatasync: ${seq_s} s"
echo "sequential_write_MB_s=$seq_mb_s"
echo "sequential_write_MiB_s=$seq_mib_s"

# 2. Sequential read of the same file from the disk: once through the page
#    cache with the file evicted first (as the log reads: buffered, with
#    readahead), once with O_DIRECT.
dd if="$file" iflag=nocache count=0 status=none
read_s="$(LC_ALL=C dd if="$file" of=/dev/null bs=1M 2>&1 | seconds_of)"
read_mb_s="$(awk -v s="$read_s" 'BEGIN { printf "%.0f", 1073741824 / s / 1e6 }')"
echo "# sequential read, 1 GiB, bs=1M, evicted from the page cache first: ${read_s} s"
echo "sequential_read_MB_s=$read_mb_s"
direct_s="$(LC_ALL=C dd if="$file" of=/dev/null bs=1M iflag=direct 2>&1 | seconds_of)"
direct_mb_s="$(awk -v s="$direct_s" 'BEGIN { printf "%.0f", 1073741824 / s / 1e6 }')"
echo "# sequential read, 1 GiB, bs=1M, iflag=direct: ${direct_s} s"
echo "sequential_read_direct_MB_s=$direct_mb_s"
rm -f "$file"

# 3. Small synchronous writes: 1000 x 4 KiB with O_DSYNC, i.e. one fdatasync
#    per write, appending to a new file (as the log's active segment does).
count=1000
dsync_s="$(LC_ALL=C dd if=/dev/zero of="$file" bs=4k count=$count oflag=dsync 2>&1 | seconds_of)"
fsync_us="$(awk -v s="$dsync_s" -v n=$count 'BEGIN { printf "%.0f", s / n * 1e6 }')"
fsyncs_s="$(awk -v s="$dsync_s" -v n=$count 'BEGIN { printf "%.0f", n / s }')"
echo "# ${count} x 4 KiB writes, oflag=dsync: ${dsync_s} s"
echo "fsync_latency_us=$fsync_us"
echo "fsyncs_per_s=$fsyncs_s"

echo "WEIR_DISK_MB_S=$seq_mb_s"
echo "WEIR_DISK_READ_MB_S=$read_mb_s"
echo "WEIR_FSYNC_US=$fsync_us"
