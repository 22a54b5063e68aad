// The two-rank benchmarks' bootstrap (nvshmem_bench.cu, nccl_device_bench.cu):
// rank 0 writes its library's unique ID to a file, rank 1 polls for it
// (60 s). The includer defines DIE(fmt, ...), which must not return.
#pragma once
#include <cstdio>
#include <sys/stat.h>
#include <unistd.h>

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
