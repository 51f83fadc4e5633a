# NCCL for cudarc (fixtures/nccl-app), sourced by multi-gpu.sh and suite.sh. cudarc 0.19, built
# for CUDA 12.8, looks for libnccl.so, libnccl.so.12, .11, … but never NCCL's own soname,
# libnccl.so.2, which is all a host without NCCL's development package has.
#
# `nccl_link DIR` sets `nccl` to NCCL's library (ldconfig's, else the first of the usual
# directories'; empty when there is none) and, when there is one, links it as DIR/libnccl.so:
# put DIR on LD_LIBRARY_PATH for cudarc to find it.
nccl_link() {
    local dir=$1 candidate
    nccl=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.[0-9]+ / { print $NF; exit }')
    if [ -z "$nccl" ]; then
        for candidate in /usr/lib/x86_64-linux-gnu/libnccl.so.* /lib/x86_64-linux-gnu/libnccl.so.* \
            ${CUDA_HOME:+"$CUDA_HOME"/lib64/libnccl.so.*} /usr/local/cuda/lib64/libnccl.so.*; do
            if [ -e "$candidate" ]; then
                nccl=$candidate
                break
            fi
        done
    fi
    if [ -n "$nccl" ]; then
        mkdir -p "$dir"
        ln -sf "$nccl" "$dir/libnccl.so"
    fi
}
