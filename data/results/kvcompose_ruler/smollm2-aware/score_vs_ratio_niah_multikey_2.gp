if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 800,500 font 'sans,10' noenhanced } else { set terminal png size 800,500 noenhanced }
set output 'score_vs_ratio_niah_multikey_2.png'
set title 'niah_multikey_2: string_match vs compression ratio' noenhanced
set xlabel 'compression ratio (share removed)' noenhanced
set ylabel 'string_match' noenhanced
set key outside right noenhanced
set grid
set xrange [-0.02:1]
plot 'score_vs_ratio_niah_multikey_2.dat' index 0 using 1:2 with linespoints lc rgb '#1f77b4' dt 1 pt 7 lw 2 title 'none (uncompressed)', \
     'score_vs_ratio_niah_multikey_2.dat' index 1 using 1:2 with linespoints lc rgb '#ff7f0e' dt 1 pt 5 lw 2 title 'kvcompose', \
     'score_vs_ratio_niah_multikey_2.dat' index 2 using 1:2 with linespoints lc rgb '#2ca02c' dt 1 pt 9 lw 2 title 'tova', \
     'score_vs_ratio_niah_multikey_2.dat' index 3 using 1:2 with linespoints lc rgb '#d62728' dt 1 pt 11 lw 2 title 'snapkv', \
     'score_vs_ratio_niah_multikey_2.dat' index 4 using 1:2 with linespoints lc rgb '#9467bd' dt 1 pt 13 lw 2 title 'pyramidkv', \
     'score_vs_ratio_niah_multikey_2.dat' index 5 using 1:2 with linespoints lc rgb '#8c564b' dt 1 pt 1 lw 2 title 'streaming_llm', \
     'score_vs_ratio_niah_multikey_2.dat' index 6 using 1:2 with linespoints lc rgb '#e377c2' dt 1 pt 2 lw 2 title 'expected_attention', \
     'score_vs_ratio_niah_multikey_2.dat' index 7 using 1:2 with linespoints lc rgb '#7f7f7f' dt 1 pt 3 lw 2 title 'duo_attention'
