// NCCL device API (2.28: ncclDevComm, symmetric windows, LSA load/store)
// reference numbers for the marrow two-GPU comparison. Between GPUs of one
// node the device API's data path is LSA: a kernel gets the peer's address
// in a registered window (ncclGetLsaPointer) and stores to it; GIN is for
// the network. 2 ranks = 2 processes, one GPU each, NCCL's unique-ID
// bootstrap: rank 0 writes the ID to a file, rank 1 reads it.
// Usage: nccl_device_bench <rank> <uid_file>
// Output: "RESULT <name> <value> <unit>" (rank 0), "INFO ...", errors on stderr.
#include <nccl.h>
#include <nccl_device.h>
#include <cuda_runtime.h>
#include "two_rank.h"
#include <cuda/atomic>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>

#define NCCL_CHECK(x)                                                          \
  do {                                                                         \
    ncclResult_t r_ = (x);                                                     \
    if (r_ != ncclSuccess) {                                                   \
      fprintf(stderr, "ERROR %s:%d: %s -> %s\n", __FILE__, __LINE__, #x,       \
              ncclGetErrorString(r_));                                         \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

// The same shapes as nvshmem_bench.cu and `marrow bench p2p`.
static const int kWarm = 1000, kIters = 10000;
static const int kBwWarm = 3, kBwIters = 20;
static const size_t kSizes[] = {4ull << 10, 64ull << 10, 1ull << 20,
                                16ull << 20, 64ull << 20, 256ull << 20};
static const size_t kMaxBytes = 256ull << 20;
static const unsigned long long kTimeoutNs = 10ull * 1000 * 1000 * 1000;

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread per rank: rank 0 stores i into rank 1's word through the LSA
// pointer and waits for rank 1 to store i back into its own (values only
// grow). System-scope relaxed accesses, as marrow's peer-store floor and
// nvshmem_long_p / wait_until. A wait past 10 s gives up: *ns = ~0.
__global__ void pingpong(ncclWindow_t win, int rank, unsigned long long *ns) {
  using ref = cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>;
  ref mine(*(unsigned long long *)ncclGetLsaPointer(win, 0, rank));
  ref theirs(*(unsigned long long *)ncclGetLsaPointer(win, 0, 1 - rank));
  unsigned long long t0 = 0, start = globaltimer();
  for (unsigned long long i = 1; i <= kWarm + kIters; i++) {
    if (i == kWarm + 1) t0 = globaltimer();
    if (rank == 0) theirs.store(i, cuda::memory_order_relaxed);
    while (mine.load(cuda::memory_order_relaxed) != i) {
      if (globaltimer() - start > kTimeoutNs) { *ns = ~0ull; return; }
    }
    if (rank == 1) theirs.store(i, cuda::memory_order_relaxed);
  }
  *ns = globaltimer() - t0;
}

// Each block stores its contiguous slice of `bytes` into the peer's window,
// `reps` times, 16 bytes per thread and 4 in flight, then one system-scope
// fence per block (what marrow's P2P quiet and nvshmem_quiet do).
__global__ void put_bw(ncclWindow_t win, int peer, const uint4 *src, size_t bytes, size_t slice, int reps) {
  uint4 *dst = (uint4 *)ncclGetLsaPointer(win, 0, peer);
  size_t off = (size_t)blockIdx.x * slice;
  if (off < bytes) {
    size_t n = (bytes - off < slice ? bytes - off : slice) / 16;
    const uint4 *s = src + off / 16;
    uint4 *d = dst + off / 16;
    for (int r = 0; r < reps; r++) {
      size_t i = threadIdx.x, step = blockDim.x;
      for (; i + 3 * step < n; i += 4 * step) {
        uint4 a = s[i], b = s[i + step], c = s[i + 2 * step], e = s[i + 3 * step];
        d[i] = a, d[i + step] = b, d[i + 2 * step] = c, d[i + 3 * step] = e;
      }
      for (; i < n; i += step) d[i] = s[i];
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_system);
}

__global__ void count_not(const unsigned char *p, size_t n, unsigned char v, unsigned long long *bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) mine += p[i] != v;
  if (mine) atomicAdd(bad, mine);
}


// Both ranks meet: a 1-element all-reduce, then a stream sync.
static void barrier(ncclComm_t comm, int *scratch, cudaStream_t st) {
  NCCL_CHECK(ncclAllReduce(scratch, scratch, 1, ncclInt, ncclSum, comm, st));
  CUDA_CHECK(cudaStreamSynchronize(st));
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 3) DIE("usage: %s <rank 0|1> <uid_file>", argv[0]);
  const int rank = atoi(argv[1]);
  if (rank != 0 && rank != 1) DIE("rank must be 0 or 1, got %s", argv[1]);
  int ndev = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) DIE("need 2 GPUs, found %d", ndev);
  CUDA_CHECK(cudaSetDevice(rank));

  ncclUniqueId id;
  if (rank == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id));
    write_uid(argv[2], &id);
  } else {
    read_uid(argv[2], &id);
  }
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, 2, id, rank));
  int version = 0;
  NCCL_CHECK(ncclGetVersion(&version));
  printf("INFO rank %d on cuda device %d, NCCL %d (header %d)\n", rank, rank, version, NCCL_VERSION_CODE);

  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int *scratch;
  CUDA_CHECK(cudaMalloc(&scratch, sizeof(int)));

  // Symmetric windows: the flag word and the destination of the puts.
  void *flag, *dst, *src;
  NCCL_CHECK(ncclMemAlloc(&flag, 4096));
  NCCL_CHECK(ncclMemAlloc(&dst, kMaxBytes));
  CUDA_CHECK(cudaMalloc(&src, kMaxBytes));
  ncclWindow_t flag_win, dst_win;
  NCCL_CHECK(ncclCommWindowRegister(comm, flag, 4096, &flag_win, NCCL_WIN_COLL_SYMMETRIC));
  NCCL_CHECK(ncclCommWindowRegister(comm, dst, kMaxBytes, &dst_win, NCCL_WIN_COLL_SYMMETRIC));
  // A device communicator, as device-API kernels are given (no barriers or
  // GIN resources needed here: LSA pointers come from the windows).
  ncclDevComm dev_comm;
#ifdef NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#else
  // NCCL 2.28 has no initializer: its requirements are plain counts, zero = none.
  ncclDevCommRequirements reqs;
  memset(&reqs, 0, sizeof reqs);
#endif
  NCCL_CHECK(ncclDevCommCreate(comm, &reqs, &dev_comm));
  printf("INFO rank %d: device communicator rank %d of %d\n", rank, dev_comm.rank, dev_comm.nRanks);

  CUDA_CHECK(cudaMemset(flag, 0, 4096));
  CUDA_CHECK(cudaMemset(src, 0x5a, kMaxBytes));
  CUDA_CHECK(cudaMemset(dst, 0, kMaxBytes));
  CUDA_CHECK(cudaDeviceSynchronize());
  barrier(comm, scratch, st);

  // (a) 8-byte round trip through LSA stores.
  unsigned long long *d_ns, h_ns = 0;
  CUDA_CHECK(cudaMalloc(&d_ns, sizeof *d_ns));
  pingpong<<<1, 1, 0, st>>>(flag_win, rank, d_ns);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(st));
  CUDA_CHECK(cudaMemcpy(&h_ns, d_ns, sizeof h_ns, cudaMemcpyDeviceToHost));
  if (h_ns == ~0ull) DIE("rank %d: ping-pong wait outlived 10 s", rank);
  if (rank == 0) printf("RESULT nccl_lsa_store_rtt_us %.3f us\n", h_ns / 1e3 / kIters);
  barrier(comm, scratch, st);

  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  // (b) rank 0 -> rank 1: 20 launches of one put each, and one launch of 20.
  for (int one_launch = 0; one_launch < 2; one_launch++) {
    for (size_t bytes : kSizes) {
      if (rank == 0) {
        // >= 16 KiB per block, at most 4 blocks per SM of an H200 (132 SMs), as nvshmem_bench.
        size_t blocks = bytes / (16 << 10);
        if (blocks < 1) blocks = 1;
        if (blocks > 132 * 4) blocks = 132 * 4;
        size_t slice = ((bytes + blocks - 1) / blocks + 255) & ~(size_t)255;
        int launches = one_launch ? 1 : kBwIters, reps = one_launch ? kBwIters : 1;
        for (int i = 0; i < kBwWarm; i++)
          put_bw<<<(unsigned)blocks, 512, 0, st>>>(dst_win, 1, (const uint4 *)src, bytes, slice, reps);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaEventRecord(e0, st));
        for (int i = 0; i < launches; i++)
          put_bw<<<(unsigned)blocks, 512, 0, st>>>(dst_win, 1, (const uint4 *)src, bytes, slice, reps);
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        printf("RESULT nccl_lsa_put_%sbw_%zu %.3f GB/s\n", one_launch ? "1launch_" : "", bytes,
               (double)bytes * kBwIters / (ms * 1e-3) / 1e9);
      }
      barrier(comm, scratch, st);
    }
  }

  // Every byte of rank 1's window is rank 0's 0x5a.
  if (rank == 1) {
    unsigned long long *d_bad, bad = 0;
    CUDA_CHECK(cudaMalloc(&d_bad, sizeof *d_bad));
    CUDA_CHECK(cudaMemset(d_bad, 0, sizeof *d_bad));
    count_not<<<528, 512, 0, st>>>((const unsigned char *)dst, kMaxBytes, 0x5a, d_bad);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
    printf("INFO rank 1: %zu bytes checked, %llu differ\n", kMaxBytes, bad);
    if (bad) DIE("rank 1: %llu of %zu bytes differ from 0x5a", bad, kMaxBytes);
    CUDA_CHECK(cudaFree(d_bad));
  }
  barrier(comm, scratch, st);

  NCCL_CHECK(ncclDevCommDestroy(comm, &dev_comm));
  NCCL_CHECK(ncclCommWindowDeregister(comm, flag_win));
  NCCL_CHECK(ncclCommWindowDeregister(comm, dst_win));
  NCCL_CHECK(ncclMemFree(flag));
  NCCL_CHECK(ncclMemFree(dst));
  CUDA_CHECK(cudaFree(src));
  CUDA_CHECK(cudaFree(d_ns));
  CUDA_CHECK(cudaFree(scratch));
  NCCL_CHECK(ncclCommFinalize(comm));
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}
