if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 800,500 font 'sans,10' noenhanced } else { set terminal png size 800,500 noenhanced }
set output 'score_vs_ratio_kl.png'
set title 'kl: kl_divergence vs compression ratio' noenhanced
set xlabel 'compression ratio (share removed)' noenhanced
set ylabel 'kl_divergence' noenhanced
set key outside right noenhanced
set grid
set xrange [-0.02:1]
plot 'score_vs_ratio_kl.dat' index 0 using 1:2 with linespoints lc rgb '#1f77b4' dt 1 pt 7 lw 2 title 'none (uncompressed)', \
     'score_vs_ratio_kl.dat' index 1 using 1:2 with linespoints lc rgb '#ff7f0e' dt 1 pt 5 lw 2 title 'retrieval/adaptive:budget=1024', \
     'score_vs_ratio_kl.dat' index 2 using 1:2 with linespoints lc rgb '#2ca02c' dt 1 pt 9 lw 2 title 'retrieval/static:budget=1024', \
     'score_vs_ratio_kl.dat' index 3 using 1:2 with linespoints lc rgb '#d62728' dt 1 pt 11 lw 2 title 'retrieval/adaptive:budget=256'
