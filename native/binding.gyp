{
  "targets": [
    {
      "target_name": "harvest_checksums",
      "sources": ["checksums.c"],
      "cflags": ["-O3", "-Wall", "-Wextra"],
      "cflags_c": ["-std=c11"]
    }
  ],
  "conditions": [
    [
      "OS=='linux'",
      {
        "targets": [
          {
            "target_name": "harvest_sendfile",
            "sources": ["sendfile.c"],
            "cflags": ["-O2", "-Wall", "-Wextra", "-pthread"],
            "cflags_c": ["-std=gnu11"],
            "ldflags": ["-pthread"]
          }
        ]
      }
    ]
  ]
}
