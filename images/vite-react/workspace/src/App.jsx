export default function App() {
  return (
    <main className="app">
      <h1>Your app is being built</h1>
      <p>Files appear here as soon as they are written.</p>
    </main>
  )
}
