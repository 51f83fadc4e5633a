// One block of 32 floats copied from src to dst with every vector width of vloadN/vstoreN,
// each part scaled by its width so that a mix-up shows: elements 0-1 (x2), 2-5 (x4, at an
// offset that is not a multiple of 4), 6-13 (x8), 14-15 (scalars, x1), 16-31 (x16, through
// the offset argument). A macro, so that the loads and stores see the caller's pointers with
// their address spaces.
#define VEC_BLOCK(src, dst)                                     \
    do {                                                        \
        vstore2(vload2(0, (src)) * 2.0f, 0, (dst));             \
        vstore4(vload4(0, (src) + 2) * 4.0f, 0, (dst) + 2);     \
        vstore8(vload8(0, (src) + 6) * 8.0f, 0, (dst) + 6);     \
        (dst)[14] = (src)[14];                                  \
        (dst)[15] = (src)[15];                                  \
        vstore16(vload16(1, (src)) * 16.0f, 1, (dst));          \
    } while (0)

#define VEC_BLOCK_LEN 32
