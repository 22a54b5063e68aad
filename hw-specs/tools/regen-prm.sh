#!/usr/bin/env bash
# Regenerates the PRM section at the end of hw-specs/mlx5.toml (everything
# from the first [[struct]] after the "PRM commands" marker) from the
# mlx5_ifc.h headers that scripts/install-test-deps.sh unpacks under target/,
# then run `cargo xtask codegen`.
set -euo pipefail
cd "$(dirname "$0")/../.."
R=target/rdma-core-src/rdma-core-56.1/providers/mlx5/mlx5_ifc.h
K=target/linux-ifc/linux/mlx5/mlx5_ifc.h
prm=$(python3 hw-specs/tools/ifc_to_toml.py \
  $K:LIFC:cqc $K:LIFC:create_cq_in $R:IFC:create_cq_out:device_to_host \
  $R:IFC:ads $R:IFC:qpc $R:IFC:create_qp_in $R:IFC:create_qp_out:device_to_host \
  $R:IFC:rst2init_qp_in $R:IFC:init2rtr_qp_in $R:IFC:rtr2rts_qp_in $R:IFC:rst2init_qp_out:device_to_host)
PRM="$prm" python3 - <<'PY'
import os
p = "hw-specs/mlx5.toml"
s = open(p).read()
i = s.index("# ------------------------------------------------------------ PRM commands")
j = s.index("[[struct]]", i)
open(p, "w").write(s[:j] + os.environ["PRM"] + "\n")
PY
