# Per-token (x) and per-layer (rows) kept ranks of keys and values, from `kvc-train inspect --tsv`.
# gnuplot -e "tsv='ranks.tsv'; out='ranks.png'" recipes/lowrank_ranks.gp
set terminal pngcairo size 1400,700 font ",9" noenhanced
set output out
set multiplot layout 2,1 title "Kept rank per token and layer, d_{kv} = 32 (stories260K, gates alpha=16, tau=0.1)"
set view map
set ylabel "layer"
set yrange [-0.5:*]
set xrange [-0.5:*]
set xlabel "token"
set cblabel "rank"
set palette defined (0 "white", 1 "#fdd49e", 2 "#ef6548", 3 "#7f0000")
set xtics rotate by 60 right font ",7"
set title "keys"
plot tsv using 1:2:3:xtic(5) with image notitle
set title "values"
plot tsv using 1:2:4:xtic(5) with image notitle
unset multiplot
