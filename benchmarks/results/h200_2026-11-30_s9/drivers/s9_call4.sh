# Session 9, call 4 (one H200, about 150 s): is the merged tree's conv forward at B4 T4096 bimodal between processes?
# Alternating processes old (0a1d524) / new, 4 rounds, three do_bench medians per process; then fwdbwd twice each.
set -u
GPU_ENV_NEEDS="fla" source scripts/gpu_env.sh
export TRITON_CACHE_DIR=/tmp/tcache
cp -r .site dev_scratch/old/ 2>/dev/null
L=$OUT/rep.log
echo "command: for i in 1 2 3 4; do (cd dev_scratch/old && python3 ../fwd_rep.py old causal_conv1d conv-b4-t4096 fwd); python3 dev_scratch/fwd_rep.py new causal_conv1d conv-b4-t4096 fwd; done" > $L
for i in 1 2 3 4; do (cd dev_scratch/old && timeout 30 python3 ../fwd_rep.py old causal_conv1d conv-b4-t4096 fwd); timeout 30 python3 dev_scratch/fwd_rep.py new causal_conv1d conv-b4-t4096 fwd; done 2>&1 | grep -v Warn >> $L
for i in 1 2; do (cd dev_scratch/old && timeout 30 python3 ../fwd_rep.py old causal_conv1d conv-b4-t4096 fwdbwd); timeout 30 python3 dev_scratch/fwd_rep.py new causal_conv1d conv-b4-t4096 fwdbwd; done 2>&1 | grep -v Warn >> $L
cat $L
