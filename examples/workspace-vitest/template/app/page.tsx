export default function Home() {
  return (
    <main>
      <h1>Welcome</h1>
      {/* TODO: status banner and call to action */}
    </main>
  );
}
