// Stylesheets imported for their side effect are bundled by Vite.
declare module '*.css';
