#!/usr/bin/env bash
# What a host with several NVIDIA GPUs offers between them (issue 41's ground): the topology
# (`nvidia-smi topo -m`), whether NCCL is installed, and scripts/gpu/peer_probe.c: peer access
# per pair and 1 GiB copies between two GPUs (cuMemcpyPeerAsync with and without peer access,
# and staged through pinned host memory). Needs nvcc (or gcc with cuda.h) on the GPU machine:
#
#   scripts/gpu/peer-probe.sh        # output in $OUT (else ./gpu-peer-out)/peer.txt
set -u
out=${OUT:-gpu-peer-out}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
    nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
    nvidia-smi topo -m
    echo "NCCL libraries:"
    ldconfig -p | grep -i nccl || find / -name 'libnccl*' -not -path '/proc/*' 2>/dev/null | head
    nvcc -O2 -o "$work/peer_probe" "$here/peer_probe.c" -lcuda && "$work/peer_probe"
} 2>&1 | tee "$out/peer.txt"
