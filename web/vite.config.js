// The web workspace of `kestrel serve` (docs/server.md "Web UI").
// scripts/build-web.sh passes --outDir (the CMake build tree's web/dist);
// a bare `npx vite build` writes web/dist (ignored).
import { defineConfig } from 'vite'
import vue from '@vitejs/plugin-vue'

export default defineConfig({
  plugins: [vue()],
  base: '/',
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    chunkSizeWarningLimit: 1200,
    rollupOptions: {
      output: {
        // Vue + Element Plus and ECharts change rarely: separate, cacheable chunks.
        manualChunks(id) {
          if (id.includes('node_modules/echarts') || id.includes('node_modules/zrender')) return 'charts'
          // onnxruntime-web: only the lazily loaded try-it panel imports it, so
          // its chunk (and the .wasm, an asset of ours) is fetched on demand.
          if (id.includes('node_modules/onnxruntime-web') || id.includes('node_modules/onnxruntime-common')) return 'ort'
          if (id.includes('node_modules')) return 'vendor'
          return undefined
        },
      },
    },
  },
})
