/** Hidden marks, one per event folded into an element: every event has one element. */
export function Marks({ seqs }: { seqs: number[] }) {
  return (
    <>
      {seqs.map((seq) => (
        <i key={seq} class="mark" data-seq={seq} hidden />
      ))}
    </>
  );
}
