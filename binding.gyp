{
  "targets": [
    {
      "target_name": "harvest_checksums",
      "sources": ["native/checksums.c"],
      "cflags": ["-O3", "-Wall", "-Wextra"],
      "cflags_c": ["-std=c11"]
    }
  ]
}
