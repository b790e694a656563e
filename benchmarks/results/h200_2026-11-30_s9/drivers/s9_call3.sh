# Session 9, call 3 (one H200, about 200 s): clean ours-only A/Bs, old tree (0a1d524, dev_scratch/old) vs the merged
# tree, alternating processes 3 rounds: causal_conv1d at both anchors, rms_norm_gated at gdn-b8-t2048 and qwen3next.
set -u
pkill -f pytest; pkill -f gpu_bench; sleep 2; nvidia-smi --query-compute-apps=pid,name --format=csv
GPU_ENV_NEEDS="fla" source scripts/gpu_env.sh
export TRITON_CACHE_DIR=/tmp/tcache
cp -r .site dev_scratch/old/ 2>/dev/null
L=$OUT/ab.log
echo "command: for i in 1 2 3; do for t in old new; do python3 dev_scratch/op_ab.py \$t causal_conv1d conv-b4-t4096,conv-t32k; python3 dev_scratch/op_ab.py \$t rms_norm_gated gdn-b8-t2048,qwen3next; done; done (old in dev_scratch/old)" > $L
for i in 1 2 3; do
  (cd dev_scratch/old && timeout 40 python3 ../op_ab.py old causal_conv1d conv-b4-t4096,conv-t32k && timeout 40 python3 ../op_ab.py old rms_norm_gated gdn-b8-t2048,qwen3next)
  timeout 40 python3 dev_scratch/op_ab.py new causal_conv1d conv-b4-t4096,conv-t32k && timeout 40 python3 dev_scratch/op_ab.py new rms_norm_gated gdn-b8-t2048,qwen3next
done 2>&1 | grep -v Warn >> $L
sort -k2,4 -s $L | awk '{print}' 
