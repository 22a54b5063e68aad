// NVSHMEM reference numbers for the marrow two-GPU comparison.
// 2 PEs = 2 processes, one GPU each, bootstrapped with NVSHMEM's unique-ID
// bootstrap (no MPI): rank 0 writes the ID to a file, rank 1 reads it.
// Usage: nvshmem_bench <rank> <uid_file>
// Output: machine-readable lines "RESULT <name> <value> <unit>" (PE 0 only).
#include <nvshmem.h>
#include <nvshmemx.h>
#include <cuda_runtime.h>
#include "two_rank.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>

static const int kWarm = 1000, kIters = 10000;      // ping-pong
static const int kBwWarm = 3, kBwIters = 20;        // bandwidth
static const size_t kSizes[] = {4ull << 10, 64ull << 10, 1ull << 20,
                                16ull << 20, 64ull << 20, 256ull << 20};
static const size_t kMaxBytes = 256ull << 20;

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread per PE. PE0 puts i into PE1's flag and waits for PE1 to put i
// back into its own; values only grow, so no reset is needed between rounds.
__global__ void pingpong(long *flag, int mype, unsigned long long *ns) {
  const int peer = 1 - mype;
  unsigned long long t0 = 0;
  for (long i = 1; i <= kWarm + kIters; i++) {
    if (i == kWarm + 1) t0 = globaltimer();
    if (mype == 0) {
      nvshmem_long_p(flag, i, peer);
      nvshmem_long_wait_until(flag, NVSHMEM_CMP_EQ, i);
    } else {
      nvshmem_long_wait_until(flag, NVSHMEM_CMP_EQ, i);
      nvshmem_long_p(flag, i, peer);
    }
  }
  *ns = globaltimer() - t0;
}

// Each block puts its contiguous slice; one quiet per block so every launch
// ends with its data delivered, as a kernel-initiated transfer must.
__global__ void put_bw(char *dst, const char *src, size_t bytes, size_t slice,
                       int peer) {
  size_t off = (size_t)blockIdx.x * slice;
  if (off < bytes) {
    size_t n = bytes - off < slice ? bytes - off : slice;
    nvshmemx_putmem_nbi_block(dst + off, src + off, n, peer);
  }
  __syncthreads();
  if (threadIdx.x == 0) nvshmem_quiet();
}


int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 3) DIE("usage: %s <rank 0|1> <uid_file>", argv[0]);
  const int rank = atoi(argv[1]);
  if (rank != 0 && rank != 1) DIE("rank must be 0 or 1, got %s", argv[1]);
  const char *uid_path = argv[2];

  int ndev = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) DIE("need 2 GPUs, found %d", ndev);
  CUDA_CHECK(cudaSetDevice(rank));  // before init: NVSHMEM binds the current device

  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (rank == 0) {
    int rc = nvshmemx_get_uniqueid(&id);
    if (rc != 0) DIE("nvshmemx_get_uniqueid returned %d", rc);
    write_uid(uid_path, &id);
  } else {
    read_uid(uid_path, &id);
  }
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  int rc = nvshmemx_set_attr_uniqueid_args(rank, 2, &id, &attr);
  if (rc != 0) DIE("nvshmemx_set_attr_uniqueid_args returned %d", rc);
  rc = nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
  if (rc != 0) DIE("nvshmemx_init_attr returned %d", rc);

  const int mype = nvshmem_my_pe(), npes = nvshmem_n_pes(), peer = 1 - mype;
  if (npes != 2 || mype != rank) DIE("pe %d of %d, expected %d of 2", mype, npes, rank);
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  // NVSHMEM_MAJOR_VERSION is the OpenSHMEM spec level; the VENDOR ones are the library's.
  printf("INFO pe %d on cuda device %d, NVSHMEM %d.%d.%d\n", mype, dev,
         NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION,
         NVSHMEM_VENDOR_PATCH_VERSION);

  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  long *flag = (long *)nvshmem_malloc(sizeof(long));
  char *dst = (char *)nvshmem_malloc(kMaxBytes);
  char *src = (char *)nvshmem_malloc(kMaxBytes);
  if (!flag || !dst || !src) DIE("nvshmem_malloc failed (raise NVSHMEM_SYMMETRIC_SIZE?)");
  // nvshmem_ptr is non-NULL only when the peer's heap is load/store reachable
  // (NVLink/PCIe P2P); NULL means a proxy transport, not the path we compare.
  printf("INFO pe %d: nvshmem_ptr(peer) %s\n", mype,
         nvshmem_ptr(flag, peer) ? "direct (P2P)" : "NULL (no P2P mapping)");
  CUDA_CHECK(cudaMemset(flag, 0, sizeof(long)));
  CUDA_CHECK(cudaMemset(src, 0x5a, kMaxBytes));
  CUDA_CHECK(cudaMemset(dst, 0, kMaxBytes));
  CUDA_CHECK(cudaDeviceSynchronize());
  nvshmem_barrier_all();

  // (a) nvshmem_long_p ping-pong, timed on the GPU.
  unsigned long long *d_ns = nullptr, h_ns = 0;
  CUDA_CHECK(cudaMalloc(&d_ns, sizeof *d_ns));
  pingpong<<<1, 1, 0, st>>>(flag, mype, d_ns);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(st));
  CUDA_CHECK(cudaMemcpy(&h_ns, d_ns, sizeof h_ns, cudaMemcpyDeviceToHost));
  if (mype == 0)
    printf("RESULT nvshmem_long_p_rtt_us %.3f us\n", h_ns / 1e3 / kIters);
  nvshmem_barrier_all();

  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));

  // (b) device-initiated putmem bandwidth PE0 -> PE1.
  for (size_t bytes : kSizes) {
    if (mype == 0) {
      // >= 16 KiB per block, at most 4 blocks per SM of an H200 (132 SMs).
      size_t blocks = bytes / (16 << 10);
      if (blocks < 1) blocks = 1;
      if (blocks > 132 * 4) blocks = 132 * 4;
      size_t slice = (bytes + blocks - 1) / blocks;
      slice = (slice + 255) & ~(size_t)255;  // keep slices 256-byte aligned
      for (int i = 0; i < kBwWarm; i++)
        put_bw<<<(unsigned)blocks, 512, 0, st>>>(dst, src, bytes, slice, peer);
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaEventRecord(e0, st));
      for (int i = 0; i < kBwIters; i++)
        put_bw<<<(unsigned)blocks, 512, 0, st>>>(dst, src, bytes, slice, peer);
      CUDA_CHECK(cudaEventRecord(e1, st));
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      printf("RESULT nvshmem_putmem_bw_%zu %.3f GB/s\n", bytes,
             (double)bytes * kBwIters / (ms * 1e-3) / 1e9);
    }
    nvshmem_barrier_all();
  }

  // (b') host-initiated, stream-ordered putmem; one quiet after the batch.
  for (size_t bytes : kSizes) {
    if (mype == 0) {
      for (int i = 0; i < kBwWarm; i++)
        nvshmemx_putmem_on_stream(dst, src, bytes, peer, st);
      nvshmemx_quiet_on_stream(st);
      CUDA_CHECK(cudaEventRecord(e0, st));
      for (int i = 0; i < kBwIters; i++)
        nvshmemx_putmem_on_stream(dst, src, bytes, peer, st);
      nvshmemx_quiet_on_stream(st);
      CUDA_CHECK(cudaEventRecord(e1, st));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      printf("RESULT nvshmem_putmem_on_stream_bw_%zu %.3f GB/s\n", bytes,
             (double)bytes * kBwIters / (ms * 1e-3) / 1e9);
    }
    nvshmem_barrier_all();
  }

  // Spot-check that the last put landed: PE1 reads back its dst.
  if (mype == 1) {
    unsigned char b[2] = {0, 0};
    CUDA_CHECK(cudaMemcpy(&b[0], dst, 1, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&b[1], dst + kMaxBytes - 1, 1, cudaMemcpyDeviceToHost));
    printf("INFO pe 1: dst check %s (0x%02x 0x%02x)\n",
           (b[0] == 0x5a && b[1] == 0x5a) ? "ok" : "MISMATCH", b[0], b[1]);
  }
  nvshmem_barrier_all();

  CUDA_CHECK(cudaFree(d_ns));
  nvshmem_free(src);
  nvshmem_free(dst);
  nvshmem_free(flag);
  CUDA_CHECK(cudaStreamDestroy(st));
  nvshmem_finalize();
  return 0;
}
