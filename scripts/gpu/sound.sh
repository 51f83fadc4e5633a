#!/usr/bin/env bash
# Issue 38's bounds on an NVIDIA GPU, from the GPU suite's archive (cargo xtask gpu-suite
# target/gpu-suite): a buffer dropped right after run() of a slow kernel, a short copy awaited
# while another queue's slow kernel runs, buffers allocated until the memory runs out, a 1 GiB
# read() into a new Vec against read_into touched memory, and an awaited kernel that faults
# (against a blocking wait for one, in another process). Prints one line each, with its time.
#
#   scripts/gpu/sound.sh target/gpu-suite/suite.tar.xz
set -u
archive=${1:?usage: sound.sh SUITE.tar.xz}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$archive" -C "$work" || exit 1
app=$(find "$work" -name events-app -type f | head -1)
export SYCL_DEVICE=${SYCL_DEVICE:-cuda:0}
SYCL_TRACE=1 timeout 300 "$app" gpu-sound 2> "${OUT:-.}/sound.trace"
echo "exit: $?"
# The driver's own time to report a fault to a blocking wait, in a process of its own.
timeout 60 "$app" gpu-fault-wait 2>/dev/null | cut -c1-160
grep -i "fault\|lost" "${OUT:-.}/sound.trace" | tail -5
