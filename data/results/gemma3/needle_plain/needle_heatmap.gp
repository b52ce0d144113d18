if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 810,300 font 'sans,10' noenhanced } else { set terminal png size 810,300 noenhanced }
set output 'needle_heatmap.png'
set title 'needle retrieval: /work/main/.venv-models/gemma3-270m/gemma-3-270m-q4_k_m.gguf (none, query-aware)' noenhanced
set xlabel 'prompt length (tokens)' noenhanced
set ylabel 'needle depth' noenhanced
set cbrange [0:1]
set cblabel 'accuracy'
set palette defined (0 '#b2182b', 0.5 '#fddbc7', 1 '#2166ac')
set xrange [-0.5:4.5]
set yrange [-0.5:2.5]
set xtics ('1024' 0, '2048' 1, '4096' 2, '8192' 3, '16384' 4)
set ytics ('0' 2, '0.5' 1, '1' 0)
set tics scale 0
unset key
plot 'needle_heatmap.dat' using 1:2:3 with image, 'needle_heatmap.dat' using 1:2:(sprintf('%.2f', $3)) with labels font ',10'
