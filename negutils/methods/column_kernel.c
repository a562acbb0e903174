/* Scores of Q queries on N images with each query's per-image edit columns added in the same pass
 * (negutils/methods/column_kernel.py compiles and calls it):
 *
 *     out[i, j] = images[i, :] . text[j, :]  +  sum_s weight[s, j] * columns[i, index[s, j]]
 *
 * Each thread takes a contiguous run of blocks of rows. For a block, MKL's sgemm (taken from the
 * libtorch_cpu that PyTorch already loaded, single-threaded inside this loop, the text packed once per
 * call) writes the cosines, and while those rows are still in cache the edit columns are added: the
 * image's row of K columns is held in ceil(K / 16) AVX-512 registers and each query's entry is picked
 * out of them with permutes, 16 queries at a time (a permute costs a cycle where a gather of 16
 * costs about twenty). So an edit costs about one add per (image, query), not K multiply-adds as
 * when the columns are appended to the product. Meanwhile the next block's rows are prefetched into
 * L2: without that, sgemm started each block waiting on memory, and the blocks cost 5-10% more than
 * PyTorch's one product over the gallery at 100K images. */
#include <immintrin.h>
#include <stdint.h>

#define MAX_COLUMNS 256
#define ROW_REGISTERS (MAX_COLUMNS / 16)

/* cblas_sgemm_compute(layout, transa, transb, m, n, k, a, lda, b, ldb, beta, c, ldc), MKL's LP64 ABI */
typedef void (*sgemm_compute_t)(int, int, int, int, int, int, const float *, int, const float *, int, float,
                                float *, int);
/* MKL_Set_Num_Threads_Local(n): the calling thread's MKL threads, returning the previous setting */
typedef int (*set_threads_t)(int);

enum { ROW_MAJOR = 101, NO_TRANSPOSE = 111, PACKED = 151 };

int column_kernel_max_columns(void) { return MAX_COLUMNS; }

static __mmask16 first(int count) {
    return count >= 16 ? (__mmask16)0xFFFF : count <= 0 ? (__mmask16)0 : (__mmask16)((1u << count) - 1);
}

/* out_row[j] += sum_s weight[s, j] * column_row[index[s, j]] for the q queries */
static void add_columns(float *out_row, const float *column_row, int k, int q, const int32_t *index,
                        const float *weight, int slots) {
    __m512 row[ROW_REGISTERS + 1];
    int registers = (k + 15) / 16;
    for (int r = 0; r < registers; r++)
        row[r] = _mm512_maskz_loadu_ps(first(k - 16 * r), column_row + 16 * r);
    row[registers] = _mm512_setzero_ps();          /* a permute reads registers in pairs */
    int pairs = (registers + 1) / 2;
    for (int s = 0; s < slots; s++) {
        const int32_t *slot_index = index + (int64_t)s * q;
        const float *slot_weight = weight + (int64_t)s * q;
        for (int j = 0; j < q; j += 16) {
            __mmask16 live = first(q - j);
            __m512i at = _mm512_maskz_loadu_epi32(live, slot_index + j);
            __m512 picked = _mm512_permutex2var_ps(row[0], at, row[1]);
            for (int p = 1; p < pairs; p++) {
                __mmask16 in_pair = _mm512_cmpeq_epi32_mask(_mm512_srli_epi32(at, 5), _mm512_set1_epi32(p));
                picked = _mm512_mask_mov_ps(picked, in_pair, _mm512_permutex2var_ps(row[2 * p], at, row[2 * p + 1]));
            }
            __m512 sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(live, slot_weight + j), picked,
                                         _mm512_maskz_loadu_ps(live, out_row + j));
            _mm512_mask_storeu_ps(out_row + j, live, sum);
        }
    }
}

/* 0 on success, -1 when k is outside 1..MAX_COLUMNS (the caller checks first) */
int column_kernel_scores(sgemm_compute_t sgemm_compute, set_threads_t set_threads, int threads, int block,
                         const float *packed_text, const float *images, int64_t n, int d, int q,
                         const float *columns, int k, const int32_t *index, const float *weight, int slots,
                         float *out) {
    if (k < 1 || k > MAX_COLUMNS)
        return -1;
    int64_t blocks = (n + block - 1) / block;
    #pragma omp parallel num_threads(threads)
    {
        int saved = set_threads(1);
        #pragma omp for schedule(static)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t start = b * block;
            int rows = (int)(n - start < block ? n - start : block);
            sgemm_compute(ROW_MAJOR, NO_TRANSPOSE, PACKED, rows, q, d, images + start * d, d, packed_text, d, 0.0f,
                          out + start * q, q);
            for (int64_t i = start; i < start + rows; i++) {
                if (i + block < n) {          /* the next block's image row, fetched while this block's edits run */
                    const char *next = (const char *)(images + (i + block) * d);
                    for (int line = 0; line < d * 4; line += 64)
                        _mm_prefetch(next + line, _MM_HINT_T1);
                    _mm_prefetch((const char *)(columns + (i + block) * k), _MM_HINT_T1);
                }
                add_columns(out + i * q, columns + i * k, k, q, index, weight, slots);
            }
        }
        set_threads(saved);
    }
    return 0;
}
