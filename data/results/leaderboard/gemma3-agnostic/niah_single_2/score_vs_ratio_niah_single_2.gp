if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 800,500 font 'sans,10' noenhanced } else { set terminal png size 800,500 noenhanced }
set output 'score_vs_ratio_niah_single_2.png'
set title 'niah_single_2: string_match vs compression ratio' noenhanced
set xlabel 'compression ratio (share removed)' noenhanced
set ylabel 'string_match' noenhanced
set key outside right noenhanced
set grid
set xrange [-0.02:1]
plot 'score_vs_ratio_niah_single_2.dat' index 0 using 1:2 with linespoints lc rgb '#1f77b4' dt 1 pt 7 lw 2 title 'none (uncompressed)', \
     'score_vs_ratio_niah_single_2.dat' index 1 using 1:2 with linespoints lc rgb '#ff7f0e' dt 1 pt 5 lw 2 title 'streaming_llm', \
     'score_vs_ratio_niah_single_2.dat' index 2 using 1:2 with linespoints lc rgb '#2ca02c' dt 1 pt 9 lw 2 title 'h2o', \
     'score_vs_ratio_niah_single_2.dat' index 3 using 1:2 with linespoints lc rgb '#d62728' dt 1 pt 11 lw 2 title 'tova', \
     'score_vs_ratio_niah_single_2.dat' index 4 using 1:2 with linespoints lc rgb '#9467bd' dt 1 pt 13 lw 2 title 'snapkv', \
     'score_vs_ratio_niah_single_2.dat' index 5 using 1:2 with linespoints lc rgb '#8c564b' dt 1 pt 1 lw 2 title 'pyramidkv', \
     'score_vs_ratio_niah_single_2.dat' index 6 using 1:2 with linespoints lc rgb '#e377c2' dt 1 pt 2 lw 2 title 'knorm', \
     'score_vs_ratio_niah_single_2.dat' index 7 using 1:2 with linespoints lc rgb '#7f7f7f' dt 1 pt 3 lw 2 title 'random', \
     'score_vs_ratio_niah_single_2.dat' index 8 using 1:2 with linespoints lc rgb '#bcbd22' dt 1 pt 4 lw 2 title 'dynamickv', \
     'score_vs_ratio_niah_single_2.dat' index 9 using 1:2 with linespoints lc rgb '#17becf' dt 1 pt 6 lw 2 title 'd2o', \
     'score_vs_ratio_niah_single_2.dat' index 10 using 1:2 with linespoints lc rgb '#1f77b4' dt 2 pt 8 lw 2 title 'kvcompose', \
     'score_vs_ratio_niah_single_2.dat' index 11 using 1:2 with linespoints lc rgb '#ff7f0e' dt 2 pt 10 lw 2 title 'kvcompose_unstructured', \
     'score_vs_ratio_niah_single_2.dat' index 12 using 1:2 with linespoints lc rgb '#2ca02c' dt 2 pt 12 lw 2 title 'ada', \
     'score_vs_ratio_niah_single_2.dat' index 13 using 1:2 with linespoints lc rgb '#d62728' dt 2 pt 7 lw 2 title 'roco', \
     'score_vs_ratio_niah_single_2.dat' index 14 using 1:2 with linespoints lc rgb '#9467bd' dt 2 pt 5 lw 2 title 'adakv', \
     'score_vs_ratio_niah_single_2.dat' index 15 using 1:2 with linespoints lc rgb '#8c564b' dt 2 pt 9 lw 2 title 'keydiff', \
     'score_vs_ratio_niah_single_2.dat' index 16 using 1:2 with linespoints lc rgb '#e377c2' dt 2 pt 11 lw 2 title 'expected_attention', \
     'score_vs_ratio_niah_single_2.dat' index 17 using 1:2 with linespoints lc rgb '#7f7f7f' dt 2 pt 13 lw 2 title 'lagkv', \
     'score_vs_ratio_niah_single_2.dat' index 18 using 1:2 with linespoints lc rgb '#bcbd22' dt 2 pt 1 lw 2 title 'leverage', \
     'score_vs_ratio_niah_single_2.dat' index 19 using 1:2 with linespoints lc rgb '#17becf' dt 2 pt 2 lw 2 title 'non_causal_attention', \
     'score_vs_ratio_niah_single_2.dat' index 20 using 1:2 with linespoints lc rgb '#1f77b4' dt 3 pt 3 lw 2 title 'cur', \
     'score_vs_ratio_niah_single_2.dat' index 21 using 1:2 with linespoints lc rgb '#ff7f0e' dt 3 pt 4 lw 2 title 'compactor', \
     'score_vs_ratio_niah_single_2.dat' index 22 using 1:2 with linespoints lc rgb '#2ca02c' dt 3 pt 6 lw 2 title 'criticalkv', \
     'score_vs_ratio_niah_single_2.dat' index 23 using 1:2 with linespoints lc rgb '#d62728' dt 3 pt 8 lw 2 title 'criticalkv_ada', \
     'score_vs_ratio_niah_single_2.dat' index 24 using 1:2 with linespoints lc rgb '#9467bd' dt 3 pt 10 lw 2 title 'cap', \
     'score_vs_ratio_niah_single_2.dat' index 25 using 1:2 with linespoints lc rgb '#8c564b' dt 3 pt 12 lw 2 title 'qfilter', \
     'score_vs_ratio_niah_single_2.dat' index 26 using 1:2 with linespoints lc rgb '#e377c2' dt 3 pt 7 lw 2 title 'chunk', \
     'score_vs_ratio_niah_single_2.dat' index 27 using 1:2 with linespoints lc rgb '#7f7f7f' dt 3 pt 5 lw 2 title 'block', \
     'score_vs_ratio_niah_single_2.dat' index 28 using 1:2 with linespoints lc rgb '#bcbd22' dt 3 pt 9 lw 2 title 'kvzip', \
     'score_vs_ratio_niah_single_2.dat' index 29 using 1:2 with linespoints lc rgb '#17becf' dt 3 pt 11 lw 2 title 'key_rerotation', \
     'score_vs_ratio_niah_single_2.dat' index 30 using 1:2 with linespoints lc rgb '#1f77b4' dt 4 pt 13 lw 2 title 'chunkkv', \
     'score_vs_ratio_niah_single_2.dat' index 31 using 1:2 with linespoints lc rgb '#ff7f0e' dt 4 pt 1 lw 2 title 'finch', \
     'score_vs_ratio_niah_single_2.dat' index 32 using 1:2 with linespoints lc rgb '#2ca02c' dt 4 pt 2 lw 2 title 'merging', \
     'score_vs_ratio_niah_single_2.dat' index 33 using 1:2 with linespoints lc rgb '#d62728' dt 4 pt 3 lw 2 title 'think:channels=0.5', \
     'score_vs_ratio_niah_single_2.dat' index 34 using 1:2 with linespoints lc rgb '#9467bd' dt 4 pt 4 lw 2 title 'simlayerkv:threshold=0.9', \
     'score_vs_ratio_niah_single_2.dat' index 35 using 1:2 with linespoints lc rgb '#8c564b' dt 4 pt 6 lw 2 title 'duo_attention:streaming=0.5', \
     'score_vs_ratio_niah_single_2.dat' index 36 using 1:2 with linespoints lc rgb '#e377c2' dt 4 pt 8 lw 2 title 'dms:base=keydiff,threshold=-0.5', \
     'score_vs_ratio_niah_single_2.dat' index 37 using 1:2 with linespoints lc rgb '#7f7f7f' dt 4 pt 10 lw 2 title 'kvcompose:task=repeat,kernel=1', \
     'score_vs_ratio_niah_single_2.dat' index 38 using 1:2 with linespoints lc rgb '#bcbd22' dt 4 pt 12 lw 2 title 'kvcompose_unstructured:task=repeat,kernel=1', \
     'score_vs_ratio_niah_single_2.dat' index 39 using 1:2 with linespoints lc rgb '#17becf' dt 4 pt 7 lw 2 title 'lukv'
