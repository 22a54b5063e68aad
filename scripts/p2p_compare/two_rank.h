// What the two-rank benchmarks (nvshmem_bench.cu, nccl_device_bench.cu)
// share: errors that end the process, and the bootstrap, in which rank 0
// writes its library's unique ID to a file and rank 1 polls for it (60 s).
// Include after <cuda_runtime.h>.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

// Any failure exits the process: the peer then stalls in a barrier, and the
// runner's `timeout` is what ends it, so the message must say where it died.
#define CUDA_CHECK(x)                                                          \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "ERROR %s:%d: %s -> %s\n", __FILE__, __LINE__, #x,       \
              cudaGetErrorString(e_));                                         \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)
#define DIE(...)                                                               \
  do {                                                                         \
    fprintf(stderr, "ERROR %s:%d: ", __FILE__, __LINE__);                      \
    fprintf(stderr, __VA_ARGS__);                                              \
    fprintf(stderr, "\n");                                                     \
    exit(1);                                                                   \
  } while (0)

template <typename Id> static void write_uid(const char *path, const Id *id) {
  // Write then rename, so rank 1 never reads a half-written file.
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) DIE("cannot create %s", tmp);
  if (fwrite(id, sizeof *id, 1, f) != 1) DIE("cannot write %s", tmp);
  fclose(f);
  if (rename(tmp, path) != 0) DIE("cannot rename %s -> %s", tmp, path);
}

template <typename Id> static void read_uid(const char *path, Id *id) {
  for (int waited_ms = 0; waited_ms < 60000; waited_ms += 50) {
    struct stat st;
    if (stat(path, &st) == 0 && (size_t)st.st_size == sizeof *id) {
      FILE *f = fopen(path, "rb");
      if (f && fread(id, sizeof *id, 1, f) == 1) { fclose(f); return; }
      if (f) fclose(f);
    }
    usleep(50 * 1000);
  }
  DIE("timed out (60 s) waiting for uid file %s", path);
}
