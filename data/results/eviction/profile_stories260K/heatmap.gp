set terminal pngcairo size 900,500 noenhanced
set view map
unset key
set autoscale fix
set output 'data/results/eviction/profile_stories260K/heatmap_layers_ratio.png'
set title 'KVCompose: share of each layer kept, by ratio'
set xlabel 'compression ratio'
set ylabel 'layer'
set xtics ("0.25" 0, "0.5" 1, "0.75" 2, "0.9" 3)
plot 'data/results/eviction/profile_stories260K/retention_matrix.txt' matrix with image
set output 'data/results/eviction/profile_stories260K/heatmap_layers_tokens.png'
set xtics auto
set title 'log10 cumulative attention received (mean over heads and windows)'
set xlabel 'token position'
set ylabel 'layer'
plot 'data/results/eviction/profile_stories260K/cumulative_matrix.txt' matrix with image
